// client.mjs - the official TypeSafe TypeScript SDK (@typesafe-ai/sdk, pinned in
// package-lock.json, installed by scripts/setup.sh into .cache/sdk-node) used as a
// real client of `jev serve`, the way its README shows: new TypeSafeClient({apiKey,
// baseURL}) and client.systemOne({state, questions}) with the noul / choice / score
// helpers. tests/test-sdk.c runs it and checks what it prints.
//
//   node tests/sdk/client.mjs --base-url URL --api-key KEY --wrong-key KEY2 --image FILE.png
//
// Prints one JSON object on stdout: the SDK's version, the models list, and for each
// case the exact body and headers the SDK sent (through a recording `fetch`), what
// the SDK returned (parsed answers, request id), or the error it raised (class,
// status, message, body, request id). It is not a test by itself: it asserts nothing
// and exits 0 once it has printed, whatever the server answered; a non-zero exit means
// the SDK could not be loaded or the client itself broke. No retries and a long
// timeout, so nothing depends on a clock.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "..", "..");

function args(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i];
    if (!k.startsWith("--") || i + 1 >= argv.length) throw new Error(`client.mjs: bad argument ${k}`);
    out[k.slice(2)] = argv[i + 1];
  }
  for (const k of ["base-url", "api-key", "wrong-key", "image"])
    if (!out[k]) throw new Error(`client.mjs: --${k} is required`);
  return out;
}

// The SDK from the folder setup.sh installs it into ($JEV_SDK_DIR overrides), through
// the package's own export map (its "import" entry), since this file lives outside it.
async function loadSdk() {
  const dir = process.env.JEV_SDK_DIR || join(root, ".cache", "sdk-node");
  const req = createRequire(join(dir, "package.json"));
  let pkgPath;
  try {
    pkgPath = req.resolve("@typesafe-ai/sdk/package.json");
  } catch (e) {
    throw new Error(`client.mjs: the TypeSafe SDK is not installed in ${dir} (run scripts/setup.sh): ${e.message}`);
  }
  const pkg = JSON.parse(readFileSync(pkgPath, "utf8"));
  const sdk = await import(pathToFileURL(join(dirname(pkgPath), pkg.exports["."].import.default)).href);
  return { sdk, installed: pkg.version };
}

const opt = args(process.argv.slice(2));
const { sdk, installed } = await loadSdk();
const { TypeSafeClient, APIError, noul, choice, score } = sdk;

// Every request the SDK makes, as it went on the wire (the key masked).
const sent = [];
const recordingFetch = (url, init) => {
  const headers = { ...init.headers };
  for (const k of Object.keys(headers)) if (k.toLowerCase() === "authorization") headers[k] = "Bearer ***";
  sent.push({ url, method: init.method, headers, body: init.body ?? null });
  return globalThis.fetch(url, init);
};

const client = (apiKey) =>
  new TypeSafeClient({
    apiKey,
    baseURL: opt["base-url"],
    fetch: recordingFetch,
    retry: { maxRetries: 0 },
    timeout: 600000,
    logLevel: "off",
  });

function describeError(e) {
  const out = { class: e?.constructor?.name ?? typeof e, message: String(e?.message ?? e) };
  out.is_api_error = e instanceof APIError;
  if (e instanceof APIError) {
    out.status = e.status;
    out.body = e.body ?? null;
    out.request_id = e.requestId ?? null;
  }
  return out;
}

// One systemOne call: what went out, and the parsed answer or the error.
async function systemOne(c, request, options) {
  const before = sent.length;
  const out = {};
  try {
    const { data, response, requestId } = await c.systemOne(request, options).withResponse();
    out.status = response.status;
    out.request_id = requestId ?? null;
    out.data = data;
  } catch (e) {
    out.error = describeError(e);
  }
  const req = sent.slice(before);
  out.sent = req.length === 1 ? req[0] : null;
  out.attempts = req.length;
  return out;
}

const good = client(opt["api-key"]);
const image = readFileSync(opt.image).toString("base64");
const result = { sdk_version: sdk.VERSION, installed_version: installed, node: process.version };

// (a) answers: a JSON state with a context, one question of each type; a string state;
// an image as a TypeSafe asset (spec §3.1), referenced from the state, with the opt-in header.
result.cases = {
  ticket: await systemOne(good, {
    state: { message: "I was charged twice for order #4411.", channel: "support", tags: ["billing", 2] },
    instructions: "You triage customer support tickets.",
    questions: {
      is_refund: noul("Is the customer asking for a refund?", { true: "asks for money back", false: "anything else" }),
      team: choice("Which team should handle this?", {
        billing: "payments and refunds",
        shipping: null,
        technical: { area: "app", note: "bugs and crashes" },
      }),
      frustration: score("How frustrated is the customer?", ["calm", "mildly annoyed", "angry"]),
    },
  }),
  plain: await systemOne(good, {
    state: "A red door in a white wall.",
    model: "jev-preview",
    questions: {
      red: noul("Is the door red?"),
      size: score({ ask: "How big is the door?", unit: "metres" }, ["small", null]),
    },
  }),
  image: await systemOne(
    good,
    {
      state: { photo: "img-rgb8", note: "a test picture" },
      assets: { "img-rgb8": { type: "image", format: "png", data_base64: image } },
      questions: {
        any: noul("Is there anything in img-rgb8?"),
        tone: choice("What is the overall tone of the picture?", { dark: null, light: null }),
      },
    },
    { headers: { "TypeSafe-Danger-Zone-Images": "true" } },
  ),
};

// (b) refused by the server, not by the SDK: a choice with no options (422), and an
// asset that nothing references (400).
result.invalid = await systemOne(good, {
  state: "x",
  questions: { pick: choice("Which one?", {}) },
});
result.unreferenced = await systemOne(
  good,
  {
    state: "no image mentioned here",
    assets: { "img-unused": { type: "image", format: "png", data_base64: image } },
    questions: { q: noul("Is it anything?") },
  },
  { headers: { "TypeSafe-Danger-Zone-Images": "true" } },
);

// (c) a wrong key: 401 when the server has a key, answered when it has none (spec §1).
result.wrong_key = await systemOne(client(opt["wrong-key"]), {
  state: "x",
  questions: { q: noul("Is it anything?") },
});

// The models list (GET /v1/models), through the SDK's own parser.
try {
  result.models = await good.models.list();
} catch (e) {
  result.models_error = describeError(e);
}

process.stdout.write(`${JSON.stringify(result)}\n`);

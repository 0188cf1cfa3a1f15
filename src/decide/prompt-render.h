/*
 * prompt-render.h - the text of the decision prompts, as UTF-8 segments that
 * the caller turns into tokens.
 *
 * Layout (docs/decide.md has it verbatim, with an example):
 *   prefix   system turn (fixed instruction [+ the request's context]), then
 *            the user turn opens: [image] [<state>...</state>] and a blank line.
 *            Shared by every question of the request: the fork point.
 *   question (label mode) "Question <id>: <instructions>", the options with
 *            their labels and descriptions, a one-line answer instruction,
 *            the user turn closes, the assistant turn opens; the label is
 *            the first token of the reply. Text mode lists the options
 *            without labels and ends at the same cue; each option's
 *            candidate text (jev_prompt_candidate) is the continuation.
 *   genjson  every question with its option ids and one instruction to reply
 *            with a compact JSON object mapping question ids to option ids.
 * Full prompts: prefix + question (the independent path renders both into
 * one jev_prompt), prefix + genjson.
 *
 * Segments say how to tokenize their text:
 *   TEMPLATE  trusted template text; may contain special tokens (<|im_start|>)
 *   USER      caller text (state, context, ids, instructions, options):
 *             encode with every added/special token disabled. "<|" and "|>"
 *             are also rewritten to "<¦" and "¦>" (llama.cpp's escape) so no
 *             look-alike of a special token reaches the model.
 *   IMAGE     an empty placeholder where the image tokens go (between the
 *             frame's image_open and image_close template text)
 * Segment boundaries are pre-token boundaries in the common cases; the fork
 * point (end of prefix) always is: the prefix ends in "\n\n" after a
 * non-space and the question begins with a letter.
 *
 * Not here: tokens, the chat template engine; the frame strings are data
 * (jev_prompt_frame_default gives Qwen3.5's non-thinking chat frame).
 */
#ifndef JEV_DECIDE_PROMPT_RENDER_H
#define JEV_DECIDE_PROMPT_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"       // defines: struct jev_buf
#include "base/error.h"     // defines: struct jev_error
#include "decide/labels.h"  // defines: struct jev_labels
#include "decide/request.h" // defines: struct jev_request

enum jev_seg_kind {
    JEV_SEG_TEMPLATE = 0, /* trusted; special tokens allowed */
    JEV_SEG_USER = 1,     /* untrusted; special tokens disabled */
    JEV_SEG_IMAGE = 2,    /* placeholder for the image tokens; len 0 */
};

struct jev_segment {
    enum jev_seg_kind kind; /* how to tokenize it */
    size_t off;             /* byte offset into jev_prompt.text */
    size_t len;             /* bytes */
};

/* The most text one prompt holds. Generous: the request's values as JSON are
 * capped at JEV_JSONW_MAX_BYTES (the same 256 MiB), the template around them
 * is small; past it rendering fails instead of growing without bound. */
#define JEV_PROMPT_MAX_BYTES ((size_t)256 << 20)

/* A rendered prompt: one contiguous text and its segments (adjacent segments
 * of one kind are merged). Grows as it is appended to; reuse with reset. */
struct jev_prompt {
    struct jev_buf text;      /* UTF-8, text.data[0 .. text.len), at most JEV_PROMPT_MAX_BYTES */
    struct jev_segment *segs; /* (n_segs) in order, covering text */
    int32_t n_segs;           /* segments */
    int32_t cap_segs;         /* segments allocated */
    bool failed;              /* an allocation or the cap failed; render calls report it */
};

/* The chat frame: template strings around the content. */
struct jev_prompt_frame {
    const char *system_open;    /* opens the system turn */
    const char *system_text;    /* the fixed instruction of the system turn */
    const char *turn_end;       /* closes any turn */
    const char *user_open;      /* opens the user turn */
    const char *image_open;     /* before the image tokens */
    const char *image_close;    /* after the image tokens */
    const char *assistant_open; /* opens the reply; its tail is the cue */
    const char *cue;            /* the tail of assistant_open the answer follows (labels are checked after it) */
};

/* Qwen3.5 (0.8B / 2B) non-thinking frame: <|im_start|>system\n ... <|im_end|>\n,
 * <|vision_start|> / <|vision_end|>, and the reply opened with an empty think
 * block "<|im_start|>assistant\n<think>\n\n</think>\n\n"; cue "\n\n". */
struct jev_prompt_frame jev_prompt_frame_default(void);

void jev_prompt_init(struct jev_prompt *p);
void jev_prompt_reset(struct jev_prompt *p); /* empties it, keeps the buffers */
void jev_prompt_free(struct jev_prompt *p);

/* Appends the shared prefix. frame NULL = jev_prompt_frame_default(). */
enum jev_status jev_prompt_prefix(struct jev_prompt *p, const struct jev_request *r,
                                  const struct jev_prompt_frame *frame, struct jev_error *err);

/* Appends question qi's suffix; labels NULL renders text mode. Fails when a
 * choice has more options than the label set (jev_labels_check). */
enum jev_status jev_prompt_question(struct jev_prompt *p, const struct jev_request *r, int32_t qi,
                                    const struct jev_prompt_frame *frame, const struct jev_labels *labels,
                                    struct jev_error *err);

/* Appends the generate_json suffix (all questions). */
enum jev_status jev_prompt_genjson(struct jev_prompt *p, const struct jev_request *r,
                                   const struct jev_prompt_frame *frame, struct jev_error *err);

/* Text mode: option i's candidate continuation, as the prompt shows it
 * (choice: the option text on one line, escaped; noul: yes/no; score: the
 * digit). Writes up to cap bytes (NUL-terminated) and returns the full
 * length, like snprintf. Encode it as USER text. */
size_t jev_prompt_candidate(const struct jev_question *q, int32_t i, char *out, size_t cap);

#endif

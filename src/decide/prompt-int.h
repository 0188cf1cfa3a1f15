/*
 * prompt-int.h - the text helpers of prompt-render.c, for the per-type
 * renderers (qtype-*.c: a type's options and answer instruction). Nothing
 * outside src/decide/ uses it.
 *
 * TEMPLATE text is trusted (special tokens allowed); USER text is the
 * caller's, escaped and trimmed as prompt-render.h says. The renderers write
 * through these only, so every type's caller text gets the same escaping.
 */
#ifndef JEV_DECIDE_PROMPT_INT_H
#define JEV_DECIDE_PROMPT_INT_H

#include <jansson.h>
#include <stdbool.h>

#include "decide/prompt-render.h" // defines: struct jev_prompt
#include "decide/request.h"       // defines: struct jev_question

/* Appends trusted template text (NULL or "" appends nothing). */
void dc_prompt_tmpl(struct jev_prompt *p, const char *s);

/* Appends caller text, trimmed and escaped; oneline turns line breaks and tabs into spaces. */
void dc_prompt_user(struct jev_prompt *p, const char *s, bool oneline);

/* Appends a caller JSON value: a string as it is, anything else as JSON (compact with oneline,
 * else indented by 2). */
void dc_prompt_user_value(struct jev_prompt *p, const json_t *v, bool oneline);

/* Whether a description is worth showing: not absent, null or a blank string. */
bool dc_prompt_has_desc(const json_t *d);

/* sep and the description on one line, or nothing when it has none. */
void dc_prompt_desc_tail(struct jev_prompt *p, const json_t *d, const char *sep);

/* [RENDER_GENJSON] shared by every type today: "\n- <id>[: <text>][ - <desc>]" per option (the line break
 * first: the last option ends the user turn directly, as the chat template trims it). */
void dc_prompt_genjson_ids(struct jev_prompt *p, const struct jev_question *q);

#endif

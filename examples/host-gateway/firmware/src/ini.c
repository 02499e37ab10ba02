/* The settings file, a line at a time: `[section]` headers, `key = value` settings, and
 * comments from `;` or `#`. A setting lands in the kvstore as `section.key`, or as `key`
 * before the first section. A value may be quoted ("a b ; c" keeps its blanks and its ';');
 * unquoted, a ';' or '#' after a blank starts a comment. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "gateway.h"

void ini_reset(struct ini_parser *parser)
{
    memset(parser, 0, sizeof *parser);
}

static enum ini_result fail(struct ini_parser *parser, const char *why, const char **detail)
{
    parser->errors++;
    *detail = why;
    return INI_ERROR;
}

static bool valid_name(const char *name)
{
    if (*name == '\0') {
        return false;
    }
    for (; *name != '\0'; name++) {
        if (!isalnum((unsigned char)*name) && *name != '_' && *name != '-') {
            return false;
        }
    }
    return true;
}

static bool comment_or_nothing(const char *text)
{
    return *text == '\0' || *text == ';' || *text == '#';
}

static enum ini_result section(struct ini_parser *parser, char *text, const char **detail)
{
    char *close = strchr(text, ']');
    if (close == NULL) {
        return fail(parser, "missing ]", detail);
    }
    if (!comment_or_nothing(trim(close + 1))) {
        return fail(parser, "text after ]", detail);
    }
    *close = '\0';
    char *name = trim(text + 1);
    if (!valid_name(name)) {
        return fail(parser, "bad section name", detail);
    }
    /* room for the dot and at least one character of a key */
    if (strlen(name) + 2 > KV_KEY_MAX) {
        return fail(parser, "section name too long", detail);
    }
    strcpy(parser->section, name);
    *detail = parser->section;
    return INI_SECTION;
}

/* Cuts the value to what it means: the inside of its quotes, or up to its comment. */
static bool value_text(char **value)
{
    char *text = *value;
    if (*text == '"') {
        char *close = strchr(text + 1, '"');
        if (close == NULL) {
            return false;
        }
        if (!comment_or_nothing(trim(close + 1))) {
            return false;
        }
        *close = '\0';
        *value = text + 1;
        return true;
    }
    /* text[-1] is still in the line: a blank that trim skipped, or the '=' cut to a NUL */
    for (char *at = text; *at != '\0'; at++) {
        if ((*at == ';' || *at == '#') && (at[-1] == ' ' || at[-1] == '\t')) {
            *at = '\0';
            break;
        }
    }
    *value = trim(text);
    return true;
}

static enum ini_result setting(struct ini_parser *parser, char *text, const char **detail)
{
    char *equals = strchr(text, '=');
    if (equals == NULL) {
        return fail(parser, "expected key = value", detail);
    }
    *equals = '\0';
    char *key = trim(text);
    char *value = trim(equals + 1);
    if (!valid_name(key)) {
        return fail(parser, "bad key", detail);
    }
    if (!value_text(&value)) {
        return fail(parser, "bad quotes", detail);
    }
    char full[KV_KEY_MAX + 2];
    int len = parser->section[0] != '\0'
                  ? snprintf(full, sizeof full, "%s.%s", parser->section, key)
                  : snprintf(full, sizeof full, "%s", key);
    if (len < 0 || (size_t)len > KV_KEY_MAX) {
        return fail(parser, "key too long", detail);
    }
    if (strlen(value) > KV_VALUE_MAX) {
        return fail(parser, "value too long", detail);
    }
    if (!kv_set(full, value)) {
        return fail(parser, "store full", detail);
    }
    strcpy(parser->key, full);
    parser->settings++;
    *detail = parser->key;
    return INI_SETTING;
}

/* One line of the file (changed in place). `detail` is the section or the full key set, or
 * what is wrong with the line. */
enum ini_result ini_feed(struct ini_parser *parser, char *line, const char **detail)
{
    char *text = trim(line);
    parser->line++;
    *detail = "";
    if (comment_or_nothing(text)) {
        return INI_BLANK;
    }
    if (*text == '[') {
        return section(parser, text, detail);
    }
    return setting(parser, text, detail);
}

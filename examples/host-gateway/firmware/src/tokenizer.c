/* The console's quoted arguments, read as a shell reads them: blanks separate tokens; '...'
 * is taken literally; "..." keeps its blanks and takes \" and \\ (any other backslash stays
 * as it is); outside quotes a backslash takes the next character as it is. Quoted pieces
 * join the text around them: a"b c"d is the one token ab cd, and "" is an empty token. */
#include "gateway.h"

struct builder {
    char *storage;
    size_t size;
    size_t used;
};

static bool put(struct builder *b, char c)
{
    if (b->used == b->size) {
        return false;
    }
    b->storage[b->used++] = c;
    return true;
}

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

/* One token from *cursor into the builder; *cursor is left after it. */
static enum tok_status one_token(const char **cursor, struct builder *b)
{
    const char *at = *cursor;
    while (*at != '\0' && !blank(*at)) {
        char c = *at++;
        if (c == '\'') {
            for (; *at != '\''; at++) {
                if (*at == '\0') {
                    return TOK_UNTERMINATED;
                }
                if (!put(b, *at)) {
                    return TOK_TOO_LONG;
                }
            }
            at++;
        } else if (c == '"') {
            for (; *at != '"'; at++) {
                if (*at == '\0') {
                    return TOK_UNTERMINATED;
                }
                if (*at == '\\' && (at[1] == '"' || at[1] == '\\')) {
                    at++;
                }
                if (!put(b, *at)) {
                    return TOK_TOO_LONG;
                }
            }
            at++;
        } else if (c == '\\') {
            if (*at == '\0') {
                return TOK_BAD_ESCAPE;
            }
            if (!put(b, *at++)) {
                return TOK_TOO_LONG;
            }
        } else if (!put(b, c)) {
            return TOK_TOO_LONG;
        }
    }
    *cursor = at;
    return TOK_OK;
}

/* The tokens of `line`, each a string in `storage`; on an error *count says how many tokens
 * came before it. */
enum tok_status tokenize(const char *line, char *storage, size_t storage_size, char **tokens,
                         size_t capacity, size_t *count)
{
    struct builder b = {storage, storage_size, 0};
    const char *at = line;
    *count = 0;
    for (;;) {
        while (blank(*at)) {
            at++;
        }
        if (*at == '\0') {
            return TOK_OK;
        }
        if (*count == capacity) {
            return TOK_TOO_MANY;
        }
        char *start = storage + b.used;
        enum tok_status status = one_token(&at, &b);
        if (status != TOK_OK) {
            return status;
        }
        if (!put(&b, '\0')) {
            return TOK_TOO_LONG;
        }
        tokens[(*count)++] = start;
    }
}

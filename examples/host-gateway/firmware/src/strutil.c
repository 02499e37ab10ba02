/* Text of the console's lines. */
#include <ctype.h>
#include <string.h>

#include "gateway.h"

size_t split_words(char *line, char **words, size_t capacity)
{
    size_t n = 0;
    char *at = line;
    while (*at != '\0' && n < capacity) {
        while (*at == ' ' || *at == '\t') {
            *at++ = '\0';
        }
        if (*at == '\0') {
            break;
        }
        words[n++] = at;
        while (*at != '\0' && *at != ' ' && *at != '\t') {
            at++;
        }
    }
    return n;
}

void to_upper(char *text)
{
    for (; *text != '\0'; text++) {
        *text = (char)toupper((unsigned char)*text);
    }
}

char *trim(char *text)
{
    while (*text == ' ' || *text == '\t' || *text == '\r' || *text == '\n') {
        text++;
    }
    size_t len = strlen(text);
    while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t' || text[len - 1] == '\r' ||
                       text[len - 1] == '\n')) {
        text[--len] = '\0';
    }
    return text;
}

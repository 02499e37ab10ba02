#include "cmdparse.h"

#include <stddef.h>

static char *skip_spaces(char *p)
{
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    return p;
}

void cmdparse_split(char *line, struct cmdline *cmd)
{
    char *p = skip_spaces(line);

    cmd->name = p;
    while (*p != '\0' && *p != ' ' && *p != '\t') {
        p++;
    }
    if (*p != '\0') {
        *p++ = '\0';
    }
    cmd->args = skip_spaces(p);
}

char *cmdparse_next_token(char **cursor)
{
    char *start = skip_spaces(*cursor);
    char *end = start;

    if (*start == '\0') {
        *cursor = start;
        return NULL;
    }
    while (*end != '\0' && *end != ' ' && *end != '\t') {
        end++;
    }
    if (*end != '\0') {
        *end++ = '\0';
    }
    *cursor = end;
    return start;
}

/* Splits a console line into its command word and the rest, and the rest into tokens. */
#ifndef UARTCON_CMDPARSE_H
#define UARTCON_CMDPARSE_H

struct cmdline {
    char *name; /* first word, NUL-terminated; "" for a blank line */
    char *args; /* text after the first word and its following spaces; never NULL */
};

/* Works in place: writes a NUL after the command word. */
void cmdparse_split(char *line, struct cmdline *cmd);

/* Returns the next space-separated token of *cursor (NUL-terminated in place) and advances
 * the cursor past it; returns NULL when no token is left. */
char *cmdparse_next_token(char **cursor);

#endif

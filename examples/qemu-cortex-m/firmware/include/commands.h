/* The console's command set: one line in, one reply line out (the prompt is main's job). */
#ifndef CM3FW_COMMANDS_H
#define CM3FW_COMMANDS_H

#define FW_VERSION "1.0"

/* Runs one command line; `line` is modified (split into words). Blank lines are not passed. */
void commands_execute(char *line);

#endif

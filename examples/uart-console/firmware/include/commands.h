/* The console's command table and dispatcher. */
#ifndef UARTCON_COMMANDS_H
#define UARTCON_COMMANDS_H

#define UARTCON_BANNER "UARTCON v1.0 ready"
#define UARTCON_VERSION "UARTCON v1.0"

void commands_init(void);

/* Runs one non-blank console line and prints its reply line. Modifies line in place. */
void commands_execute(char *line);

#endif

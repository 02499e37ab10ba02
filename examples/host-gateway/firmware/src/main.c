/* The gateway's console: one command a line on stdin, one reply line on stdout. */
#include <stdio.h>

#include "gateway.h"

int main(void)
{
    char line[512];
    kv_clear();
    ring_clear();
    reply("GATEWAY ready");
    while (fgets(line, sizeof line, stdin) != NULL) {
        commands_execute(trim(line));
    }
    return 0;
}

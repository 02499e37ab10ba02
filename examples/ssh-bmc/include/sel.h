/* The System Event Log: the last SEL_CAPACITY events, one per line in a file, oldest first. */
#ifndef BMCCTL_SEL_H
#define BMCCTL_SEL_H

#include <stdbool.h>

#define SEL_CAPACITY 8
#define SEL_TEXT_MAX 80

/* Appends `text` (at most SEL_TEXT_MAX characters), dropping the oldest events beyond
 * SEL_CAPACITY; false when the log cannot be written. */
bool sel_add(const char *path, const char *text);

/* Prints "N: text" per event, N counting from 1 for the oldest; false when unreadable. */
bool sel_list(const char *path);

bool sel_clear(const char *path);

#endif

#include "sel.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define LINE_MAX_CHARS (SEL_TEXT_MAX + 2)

/* Reads up to SEL_CAPACITY lines; a missing file is an empty log. Returns the count or -1. */
static int sel_read(const char *path, char events[SEL_CAPACITY + 1][LINE_MAX_CHARS])
{
    FILE *file = fopen(path, "r");
    int count = 0;
    if (file == NULL) {
        return errno == ENOENT ? 0 : -1;
    }
    while (count < SEL_CAPACITY && fgets(events[count], LINE_MAX_CHARS, file) != NULL) {
        events[count][strcspn(events[count], "\n")] = '\0';
        count++;
    }
    fclose(file);
    return count;
}

static bool sel_write(const char *path, char events[][LINE_MAX_CHARS], int first, int count)
{
    FILE *file = fopen(path, "w");
    if (file == NULL) {
        return false;
    }
    for (int i = first; i < count; i++) {
        fprintf(file, "%s\n", events[i]);
    }
    return fclose(file) == 0;
}

bool sel_add(const char *path, const char *text)
{
    char events[SEL_CAPACITY + 1][LINE_MAX_CHARS];
    int count = sel_read(path, events);
    if (count < 0) {
        return false;
    }
    snprintf(events[count], LINE_MAX_CHARS, "%.*s", SEL_TEXT_MAX, text);
    count++;
    return sel_write(path, events, count > SEL_CAPACITY ? count - SEL_CAPACITY : 0, count);
}

bool sel_list(const char *path)
{
    char events[SEL_CAPACITY + 1][LINE_MAX_CHARS];
    int count = sel_read(path, events);
    for (int i = 0; i < count; i++) {
        printf("%d: %s\n", i + 1, events[i]);
    }
    return count >= 0;
}

bool sel_clear(const char *path)
{
    return remove(path) == 0 || errno == ENOENT;
}

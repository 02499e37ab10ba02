#include "tmp36.h"

#include <stdio.h>

int tmp36_decidegrees(int millivolts)
{
    return millivolts - 500;
}

void tmp36_format(int decidegrees, char *out, size_t size)
{
    snprintf(out, size, "%d.%d", decidegrees / 10, decidegrees % 10);
}

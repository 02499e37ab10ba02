/* Sorting readings in place: insertion sort for a handful, quicksort beyond. */
#include "gateway.h"

#define SMALL_SORT 8

static void swap(long *a, long *b)
{
    long t = *a;
    *a = *b;
    *b = t;
}

void insertion_sort(long *values, size_t count)
{
    for (size_t i = 1; i < count; i++) {
        long v = values[i];
        size_t j = i;
        while (j > 0 && values[j - 1] > v) {
            values[j] = values[j - 1];
            j--;
        }
        values[j] = v;
    }
}

/* Lomuto's scheme around the last value; the pivot's final index. */
size_t partition(long *values, size_t low, size_t high)
{
    long pivot = values[high];
    size_t store = low;
    for (size_t i = low; i < high; i++) {
        if (values[i] < pivot) {
            swap(&values[i], &values[store]);
            store++;
        }
    }
    swap(&values[store], &values[high]);
    return store;
}

/* Sorts values[low..high], both ends included. */
void quicksort(long *values, size_t low, size_t high)
{
    while (low < high) {
        size_t p = partition(values, low, high);
        if (p - low < high - p) {
            if (p > low) {
                quicksort(values, low, p - 1);
            }
            low = p + 1;
        } else {
            quicksort(values, p + 1, high);
            if (p == 0) {
                return;
            }
            high = p - 1;
        }
    }
}

void sort_values(long *values, size_t count)
{
    if (count <= SMALL_SORT) {
        insertion_sort(values, count);
    } else {
        quicksort(values, 0, count - 1);
    }
}

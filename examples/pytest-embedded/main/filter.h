/* Moving average of the last FILTER_WINDOW samples of a sensor. */
#ifndef SENSOR_FILTER_H
#define SENSOR_FILTER_H

#define FILTER_WINDOW 4

void filter_reset(void);
/* Adds a sample; returns the mean of the samples in the window (rounded down). */
int filter_push(int sample);

#endif

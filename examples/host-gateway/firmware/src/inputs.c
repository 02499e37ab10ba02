/* Conditioning of the field inputs: an integrating debouncer for dry contacts, a hysteresis
 * comparator for alarm thresholds, a median-of-three filter against single-sample spikes, a
 * slew-rate limiter for set-points, and the two-point calibration of an analogue channel. */
#include "gateway.h"

/* The count climbs with each high sample and falls with each low one, between 0 and
 * `samples`; the state changes only at either end, so a bouncing contact must settle for
 * `samples` readings before it counts. */
void debounce_init(struct debounce *d, uint8_t samples, bool initial)
{
    d->samples = samples > 0 ? samples : 1;
    d->count = initial ? d->samples : 0;
    d->state = initial;
}

bool debounce_step(struct debounce *d, bool raw)
{
    if (raw) {
        if (d->count < d->samples) {
            d->count++;
        }
    } else if (d->count > 0) {
        d->count--;
    }
    if (d->count == 0) {
        d->state = false;
    } else if (d->count == d->samples) {
        d->state = true;
    }
    return d->state;
}

/* On at or above `high`, off again at or below `low`; in between it keeps its state. */
void hysteresis_init(struct hysteresis *h, q16_t low, q16_t high)
{
    if (low > high) {
        q16_t t = low;
        low = high;
        high = t;
    }
    h->low = low;
    h->high = high;
    h->state = false;
}

bool hysteresis_step(struct hysteresis *h, q16_t x)
{
    if (h->state) {
        if (x <= h->low) {
            h->state = false;
        }
    } else if (x >= h->high) {
        h->state = true;
    }
    return h->state;
}

void despike_init(struct despike *s)
{
    s->at = 0;
    s->filled = 0;
}

static q16_t median3(q16_t a, q16_t b, q16_t c)
{
    q16_t low = a < b ? a : b;
    q16_t high = a < b ? b : a;
    if (c <= low) {
        return low;
    }
    return c >= high ? high : c;
}

/* The median of the last three samples; the first two pass as they are. */
q16_t despike_step(struct despike *s, q16_t x)
{
    s->window[s->at] = x;
    s->at = (s->at + 1) % 3;
    if (s->filled < 3) {
        s->filled++;
    }
    if (s->filled < 3) {
        return x;
    }
    return median3(s->window[0], s->window[1], s->window[2]);
}

void slew_init(struct slew *s, q16_t max_step)
{
    s->max_step = max_step < 0 ? -max_step : max_step;
    s->out = 0;
    s->started = false;
}

/* Moves toward x by at most max_step a sample; the first sample is taken as it is. */
q16_t slew_step(struct slew *s, q16_t x)
{
    if (!s->started) {
        s->started = true;
        s->out = x;
        return x;
    }
    int64_t delta = (int64_t)x - s->out;
    if (delta > s->max_step) {
        delta = s->max_step;
    } else if (delta < -(int64_t)s->max_step) {
        delta = -(int64_t)s->max_step;
    }
    s->out = (q16_t)(s->out + delta);
    return s->out;
}

/* Two readings of known inputs, e.g. the ADC counts at 4 mA and at 20 mA and the pressures
 * they stand for; false when the two counts are the same. */
bool calibration_init(struct calibration *c, uint16_t raw_lo, q16_t eng_lo, uint16_t raw_hi,
                      q16_t eng_hi)
{
    if (raw_lo == raw_hi) {
        return false;
    }
    c->raw_lo = raw_lo;
    c->raw_hi = raw_hi;
    c->eng_lo = eng_lo;
    c->eng_hi = eng_hi;
    return true;
}

/* The straight line through both points, beyond them too, rounded to the nearest and
 * saturated: at most 2^16 counts times 2^32 of span, so the product fits 64 bits. */
q16_t calibration_apply(const struct calibration *c, uint16_t raw)
{
    int64_t span = (int64_t)c->eng_hi - c->eng_lo;
    int64_t counts = (int64_t)c->raw_hi - c->raw_lo;
    int64_t offset = (int64_t)raw - c->raw_lo;
    int64_t product = offset * span;
    if (counts < 0) {
        counts = -counts;
        product = -product;
    }
    int64_t half = product >= 0 ? counts / 2 : -(counts / 2);
    int64_t value = c->eng_lo + (product + half) / counts;
    if (value > INT32_MAX) {
        return INT32_MAX;
    }
    if (value < INT32_MIN) {
        return INT32_MIN;
    }
    return (q16_t)value;
}

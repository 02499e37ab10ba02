/* The uplink's rate limiter: a token bucket kept in milli-tokens. Ticks are milliseconds and
 * the rate is in tokens a second, so each tick adds exactly `rate` milli-tokens and no
 * fraction is ever lost to rounding. Ticks compare modulo 2^32 (the tick counter wraps after
 * 49 days); a tick before the last refill, from a caller that read the clock early, adds
 * nothing and does not move the refill point back. */
#include "gateway.h"

#define MILLI 1000u

void tb_init(struct token_bucket *tb, uint32_t tokens, uint32_t per_second, uint32_t now)
{
    if (tokens > TB_MAX_TOKENS) {
        tokens = TB_MAX_TOKENS;
    }
    if (per_second > TB_MAX_TOKENS) {
        per_second = TB_MAX_TOKENS;
    }
    tb->capacity = tokens * MILLI;
    tb->level = tb->capacity; /* a fresh link may burst */
    tb->rate = per_second;
    tb->last = now;
}

static void refill(struct token_bucket *tb, uint32_t now)
{
    int32_t elapsed = (int32_t)(now - tb->last);
    if (elapsed <= 0) {
        return;
    }
    uint64_t level = tb->level + (uint64_t)(uint32_t)elapsed * tb->rate;
    tb->level = level > tb->capacity ? tb->capacity : (uint32_t)level;
    tb->last = now;
}

/* Takes `cost` tokens if the bucket holds them; a refused take takes nothing. */
bool tb_take(struct token_bucket *tb, uint32_t now, uint32_t cost)
{
    refill(tb, now);
    if (cost > TB_MAX_TOKENS || cost * MILLI > tb->level) {
        return false;
    }
    tb->level -= cost * MILLI;
    return true;
}

/* Ticks from `now` until `cost` tokens are there (0: now); TB_NEVER when they never will
 * be. A `now` before the last refill waits for the refill point first. */
uint32_t tb_wait(struct token_bucket *tb, uint32_t now, uint32_t cost)
{
    refill(tb, now);
    if (cost > TB_MAX_TOKENS || cost * MILLI > tb->capacity) {
        return TB_NEVER;
    }
    uint32_t need = cost * MILLI;
    if (need <= tb->level) {
        return 0;
    }
    if (tb->rate == 0) {
        return TB_NEVER;
    }
    int32_t behind = (int32_t)(tb->last - now);
    uint32_t refill_ticks = (need - tb->level + tb->rate - 1) / tb->rate;
    return behind > 0 ? refill_ticks + (uint32_t)behind : refill_ticks;
}

/* The milli-tokens held at `now`. */
uint32_t tb_level(struct token_bucket *tb, uint32_t now)
{
    refill(tb, now);
    return tb->level;
}

/* The main loop's periodic tasks, in ticks. A task first runs `phase` ticks after it is
 * added, then every `period` ticks after that due tick (not after the tick it ran on, so
 * the schedule does not drift); a period of 0 runs it once. Tasks due on the same tick run
 * in the order they were added. Due ticks compare modulo 2^32, so the tick counter may wrap
 * as long as no task is more than 2^31 ticks ahead. */
#include <string.h>

#include "gateway.h"

struct sched_task {
    char name[SCHED_NAME_MAX + 1];
    uint32_t period;
    uint32_t due;
    uint32_t runs;
    uint32_t order; /* when it was added: the tie-break between tasks due together */
    bool used;
    bool enabled;
};

static struct sched_task tasks[SCHED_TASKS];
static uint32_t now;
static uint32_t added;

/* a is before b, modulo 2^32 */
static bool tick_before(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) < 0;
}

static struct sched_task *find(const char *name)
{
    for (size_t i = 0; i < SCHED_TASKS; i++) {
        if (tasks[i].used && strcmp(tasks[i].name, name) == 0) {
            return &tasks[i];
        }
    }
    return NULL;
}

static bool valid_name(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > SCHED_NAME_MAX) {
        return false;
    }
    for (; *name != '\0'; name++) {
        char c = *name;
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
        if (!ok) {
            return false;
        }
    }
    return true;
}

void sched_reset(uint32_t start)
{
    memset(tasks, 0, sizeof tasks);
    now = start;
    added = 0;
}

uint32_t sched_now(void)
{
    return now;
}

enum sched_add_status sched_add(const char *name, uint32_t period, uint32_t phase)
{
    struct sched_task *slot = NULL;
    if (!valid_name(name)) {
        return SCHED_BAD_NAME;
    }
    if (find(name) != NULL) {
        return SCHED_DUPLICATE;
    }
    for (size_t i = 0; i < SCHED_TASKS && slot == NULL; i++) {
        if (!tasks[i].used) {
            slot = &tasks[i];
        }
    }
    if (slot == NULL) {
        return SCHED_FULL;
    }
    memset(slot, 0, sizeof *slot);
    strcpy(slot->name, name);
    slot->period = period;
    slot->due = now + phase;
    slot->order = added++;
    slot->used = true;
    slot->enabled = true;
    return SCHED_ADDED;
}

bool sched_remove(const char *name)
{
    struct sched_task *task = find(name);
    if (task == NULL) {
        return false;
    }
    task->used = false;
    return true;
}

/* A task switched back on runs next one period from now: the runs it missed while off are
 * not made up. */
bool sched_set_enabled(const char *name, bool enabled)
{
    struct sched_task *task = find(name);
    if (task == NULL) {
        return false;
    }
    if (enabled && !task->enabled) {
        task->due = now + task->period;
    }
    task->enabled = enabled;
    return true;
}

/* The enabled task due first at or before `limit`, or NULL. */
static struct sched_task *next_due(uint32_t limit)
{
    struct sched_task *best = NULL;
    for (size_t i = 0; i < SCHED_TASKS; i++) {
        struct sched_task *task = &tasks[i];
        if (!task->used || !task->enabled || tick_before(limit, task->due)) {
            continue;
        }
        if (best == NULL || tick_before(task->due, best->due) ||
            (task->due == best->due && task->order < best->order)) {
            best = task;
        }
    }
    return best;
}

/* Moves the clock `ticks` on, running each task due on the way (the hook hears of each run
 * as it happens); the number of runs. */
size_t sched_advance(uint32_t ticks, sched_hook hook, void *context)
{
    uint32_t target = now + ticks;
    size_t ran = 0;
    struct sched_task *task;
    while ((task = next_due(target)) != NULL) {
        now = task->due;
        task->runs++;
        ran++;
        if (hook != NULL) {
            hook(task->name, now, context);
        }
        if (task->period == 0) {
            task->enabled = false;
        } else {
            task->due += task->period;
        }
    }
    now = target;
    return ran;
}

bool sched_runs(const char *name, uint32_t *runs)
{
    struct sched_task *task = find(name);
    if (task == NULL) {
        return false;
    }
    *runs = task->runs;
    return true;
}

/* The task that runs next and its due tick; false when none is enabled. */
bool sched_next(const char **name, uint32_t *due)
{
    struct sched_task *best = next_due(now + INT32_MAX);
    if (best == NULL) {
        return false;
    }
    *name = best->name;
    *due = best->due;
    return true;
}

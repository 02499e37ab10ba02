/* The gateway's settings: a small open-addressing hash table, linear probing, tombstones. */
#include <string.h>

#include "gateway.h"

enum slot_state { SLOT_EMPTY, SLOT_USED, SLOT_DELETED };

struct slot {
    enum slot_state state;
    char key[KV_KEY_MAX + 1];
    char value[KV_VALUE_MAX + 1];
};

static struct slot slots[KV_SLOTS];

static uint32_t kv_hash(const char *key)
{
    uint32_t h = 2166136261u;
    for (; *key != '\0'; key++) {
        h ^= (uint8_t)*key;
        h *= 16777619u;
    }
    return h;
}

/* The slot holding `key`, or where it would go (-1: the table is full). */
static int kv_find(const char *key, bool *found)
{
    uint32_t start = kv_hash(key) % KV_SLOTS;
    int free_slot = -1;
    *found = false;
    for (uint32_t n = 0; n < KV_SLOTS; n++) {
        uint32_t i = (start + n) % KV_SLOTS;
        if (slots[i].state == SLOT_EMPTY) {
            return free_slot >= 0 ? free_slot : (int)i;
        }
        if (slots[i].state == SLOT_DELETED) {
            if (free_slot < 0) {
                free_slot = (int)i;
            }
            continue;
        }
        if (strcmp(slots[i].key, key) == 0) {
            *found = true;
            return (int)i;
        }
    }
    return free_slot;
}

void kv_clear(void)
{
    memset(slots, 0, sizeof slots);
}

bool kv_set(const char *key, const char *value)
{
    bool found = false;
    if (strlen(key) > KV_KEY_MAX || strlen(value) > KV_VALUE_MAX || *key == '\0') {
        return false;
    }
    int i = kv_find(key, &found);
    if (i < 0) {
        return false;
    }
    slots[i].state = SLOT_USED;
    strcpy(slots[i].key, key);
    strcpy(slots[i].value, value);
    return true;
}

const char *kv_get(const char *key)
{
    bool found = false;
    int i = kv_find(key, &found);
    return found ? slots[i].value : NULL;
}

bool kv_delete(const char *key)
{
    bool found = false;
    int i = kv_find(key, &found);
    if (!found) {
        return false;
    }
    slots[i].state = SLOT_DELETED;
    return true;
}

size_t kv_count(void)
{
    size_t n = 0;
    for (size_t i = 0; i < KV_SLOTS; i++) {
        n += slots[i].state == SLOT_USED;
    }
    return n;
}

/* Settings records in flash: two banks of FLASH_BANK_SIZE bytes. The host build keeps them
 * in RAM and programs them as NOR flash is programmed: a write can only clear bits, an erase
 * sets a whole bank to 0xFF.
 *
 * A bank starts with a header, 'R' 'C' gen ~gen. Records follow it, appended and never
 * rewritten:  0xA5, id, len, len bytes of payload, then the CRC-16/CCITT-FALSE of the first
 * 3 + len bytes, high byte first. The last good record of an id is its value; a record of
 * length 0 deletes the id. When a record no longer fits, the live records move to the other
 * bank, whose header (gen + 1) is written last, and then the old bank is erased: a reset at
 * any point leaves one bank with a good header and every setting's latest value. */
#include <string.h>

#include "gateway.h"

#define HEADER_SIZE 4
#define RECORD_MAGIC 0xA5
#define RECORD_OVERHEAD 5
#define ERASED 0xFF

static uint8_t banks[2][FLASH_BANK_SIZE];

static struct {
    bool mounted;
    int bank;
    uint8_t generation;
    size_t used;              /* where the free space of the active bank starts */
    size_t bad;               /* records the last scan could not trust */
    uint16_t latest[REC_IDS]; /* offset of each id's latest record; 0 for none */
} fs;

static void bank_erase(int bank)
{
    memset(banks[bank], ERASED, FLASH_BANK_SIZE);
}

/* Programs and reads back: false when the cells were not erased where the data needs ones. */
static bool bank_program(int bank, size_t at, const uint8_t *data, size_t len)
{
    if (at > FLASH_BANK_SIZE || len > FLASH_BANK_SIZE - at) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        banks[bank][at + i] &= data[i];
    }
    return memcmp(banks[bank] + at, data, len) == 0;
}

static bool header_valid(int bank, uint8_t *generation)
{
    const uint8_t *p = banks[bank];
    *generation = p[2];
    return p[0] == 'R' && p[1] == 'C' && (p[2] ^ p[3]) == 0xFF;
}

static bool write_header(int bank, uint8_t generation)
{
    const uint8_t header[HEADER_SIZE] = {'R', 'C', generation, (uint8_t)~generation};
    return bank_program(bank, 0, header, sizeof header);
}

static uint16_t stored_crc(const uint8_t *record)
{
    size_t len = record[2];
    return (uint16_t)(record[3 + len] << 8 | record[4 + len]);
}

static bool record_good(const uint8_t *record)
{
    return record[1] < REC_IDS && crc16_ccitt(record, 3u + record[2]) == stored_crc(record);
}

/* Walks the active bank's records: each id's latest good record, and where the free space
 * starts. A record with a bad CRC is skipped by its length; a byte that starts no record
 * (or a length past the bank) leaves the rest of the bank unreadable, and full. */
static void scan(void)
{
    const uint8_t *p = banks[fs.bank];
    size_t at = HEADER_SIZE;
    memset(fs.latest, 0, sizeof fs.latest);
    fs.bad = 0;
    while (at < FLASH_BANK_SIZE && p[at] != ERASED) {
        if (p[at] != RECORD_MAGIC || FLASH_BANK_SIZE - at < RECORD_OVERHEAD ||
            FLASH_BANK_SIZE - at - RECORD_OVERHEAD < p[at + 2]) {
            fs.bad++;
            at = FLASH_BANK_SIZE;
            break;
        }
        if (record_good(p + at)) {
            fs.latest[p[at + 1]] = p[at + 2] > 0 ? (uint16_t)at : 0;
        } else {
            fs.bad++;
        }
        at += RECORD_OVERHEAD + p[at + 2];
    }
    fs.used = at;
}

void flashrec_format(void)
{
    bank_erase(0);
    bank_erase(1);
    write_header(0, 1);
    fs.bank = 0;
    fs.generation = 1;
    fs.mounted = true;
    scan();
}

/* As at boot: the bank with the good header, the newer (modulo 256) when both have one, as
 * a compaction cut short before its erase leaves them; the older is erased then. */
void flashrec_mount(void)
{
    uint8_t gen0 = 0;
    uint8_t gen1 = 0;
    bool valid0 = header_valid(0, &gen0);
    bool valid1 = header_valid(1, &gen1);
    if (!valid0 && !valid1) {
        flashrec_format();
        return;
    }
    if (valid0 && valid1) {
        fs.bank = (int8_t)(uint8_t)(gen1 - gen0) > 0 ? 1 : 0;
        bank_erase(1 - fs.bank);
    } else {
        fs.bank = valid0 ? 0 : 1;
    }
    fs.generation = fs.bank == 0 ? gen0 : gen1;
    fs.mounted = true;
    scan();
}

static void ensure_mounted(void)
{
    if (!fs.mounted) {
        flashrec_mount();
    }
}

/* Copies the live records into the other bank and makes it the active one. */
static bool compact(void)
{
    int from = fs.bank;
    int to = 1 - from;
    uint8_t generation = (uint8_t)(fs.generation + 1);
    uint16_t moved[REC_IDS] = {0};
    size_t at = HEADER_SIZE;
    bank_erase(to);
    for (size_t id = 0; id < REC_IDS; id++) {
        if (fs.latest[id] == 0) {
            continue;
        }
        const uint8_t *record = banks[from] + fs.latest[id];
        size_t size = RECORD_OVERHEAD + record[2];
        if (!record_good(record)) {
            continue; /* gone bad since the scan: its older value is not in the index */
        }
        if (!bank_program(to, at, record, size)) {
            return false;
        }
        moved[id] = (uint16_t)at;
        at += size;
    }
    if (!write_header(to, generation)) {
        return false;
    }
    bank_erase(from);
    fs.bank = to;
    fs.generation = generation;
    fs.used = at;
    fs.bad = 0;
    memcpy(fs.latest, moved, sizeof moved);
    return true;
}

static enum rec_status append(uint8_t id, const uint8_t *payload, size_t len)
{
    uint8_t record[RECORD_OVERHEAD + REC_PAYLOAD_MAX];
    size_t size = RECORD_OVERHEAD + len;
    if (size > FLASH_BANK_SIZE - fs.used) {
        if (!compact()) {
            return REC_WRITE_FAILED;
        }
        if (size > FLASH_BANK_SIZE - fs.used) {
            return REC_FULL;
        }
    }
    record[0] = RECORD_MAGIC;
    record[1] = id;
    record[2] = (uint8_t)len;
    if (len > 0) {
        memcpy(record + 3, payload, len);
    }
    uint16_t crc = crc16_ccitt(record, 3 + len);
    record[3 + len] = (uint8_t)(crc >> 8);
    record[4 + len] = (uint8_t)(crc & 0xFFu);
    size_t at = fs.used;
    /* whatever the write left there is no longer free space */
    fs.used += size;
    if (!bank_program(fs.bank, at, record, size)) {
        return REC_WRITE_FAILED;
    }
    fs.latest[id] = len > 0 ? (uint16_t)at : 0;
    return REC_OK;
}

enum rec_status flashrec_put(uint8_t id, const uint8_t *payload, size_t len)
{
    if (id >= REC_IDS || len == 0 || len > REC_PAYLOAD_MAX) {
        return REC_BAD_ARGUMENT;
    }
    ensure_mounted();
    return append(id, payload, len);
}

/* The CRC is checked again on each read: flash can go bad after the scan trusted it. */
enum rec_status flashrec_get(uint8_t id, uint8_t *payload, size_t capacity, size_t *len)
{
    *len = 0;
    if (id >= REC_IDS) {
        return REC_BAD_ARGUMENT;
    }
    ensure_mounted();
    if (fs.latest[id] == 0) {
        return REC_NOT_FOUND;
    }
    const uint8_t *record = banks[fs.bank] + fs.latest[id];
    if (record[1] != id || !record_good(record)) {
        return REC_CORRUPT;
    }
    if (record[2] > capacity) {
        return REC_BAD_ARGUMENT;
    }
    memcpy(payload, record + 3, record[2]);
    *len = record[2];
    return REC_OK;
}

enum rec_status flashrec_delete(uint8_t id)
{
    if (id >= REC_IDS) {
        return REC_BAD_ARGUMENT;
    }
    ensure_mounted();
    if (fs.latest[id] == 0) {
        return REC_NOT_FOUND;
    }
    return append(id, NULL, 0);
}

void flashrec_info(struct flashrec_info *info)
{
    ensure_mounted();
    info->bank = fs.bank;
    info->generation = fs.generation;
    info->used = fs.used;
    info->bad = fs.bad;
    info->live = 0;
    for (size_t id = 0; id < REC_IDS; id++) {
        info->live += fs.latest[id] != 0;
    }
}

/* The bench's fault injection: flips the bits of `mask` in the active bank at `offset`. */
bool flashrec_corrupt(size_t offset, uint8_t mask)
{
    ensure_mounted();
    if (offset >= FLASH_BANK_SIZE) {
        return false;
    }
    banks[fs.bank][offset] ^= mask;
    return true;
}

/* Type-length-value records of the provisioning blobs: a type byte, a definite length as BER
 * writes it (one byte below 0x80, else 0x81 and one length byte or 0x82 and two, shortest
 * form only) and the value. The config blob is such records with the types below, each
 * landing in the kvstore under its key. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "gateway.h"

void tlv_reader_init(struct tlv_reader *reader, const uint8_t *data, size_t len)
{
    reader->data = data;
    reader->len = len;
    reader->at = 0;
}

/* The next record, TLV_END after the last; a broken record stops the reader where it is. */
enum tlv_status tlv_next(struct tlv_reader *reader, struct tlv_item *item)
{
    if (reader->at == reader->len) {
        return TLV_END;
    }
    const uint8_t *p = reader->data + reader->at;
    size_t left = reader->len - reader->at;
    size_t header = 2;
    size_t length = 0;
    if (left < 2) {
        return TLV_TRUNCATED;
    }
    if (p[1] < 0x80) {
        length = p[1];
    } else if (p[1] == 0x81) {
        if (left < 3) {
            return TLV_TRUNCATED;
        }
        length = p[2];
        header = 3;
        if (length < 0x80) {
            return TLV_BAD_LENGTH;
        }
    } else if (p[1] == 0x82) {
        if (left < 4) {
            return TLV_TRUNCATED;
        }
        length = (size_t)p[2] << 8 | p[3];
        header = 4;
        if (length < 0x100) {
            return TLV_BAD_LENGTH;
        }
    } else {
        /* 0x80 is BER's indefinite length; 0x83 and up are longer than any blob we take */
        return TLV_BAD_LENGTH;
    }
    if (length > left - header) {
        return TLV_TRUNCATED;
    }
    item->type = p[0];
    item->length = length;
    item->value = p + header;
    reader->at += header + length;
    return TLV_OK;
}

/* Writes a record at out[at]: where the next one goes, or 0 when it does not fit. */
size_t tlv_put(uint8_t *out, size_t capacity, size_t at, uint8_t type, const uint8_t *value,
               size_t length)
{
    size_t header = length < 0x80 ? 2 : length < 0x100 ? 3 : 4;
    if (length > 0xFFFF || at > capacity || capacity - at < header + length) {
        return 0;
    }
    out[at] = type;
    if (header == 2) {
        out[at + 1] = (uint8_t)length;
    } else if (header == 3) {
        out[at + 1] = 0x81;
        out[at + 2] = (uint8_t)length;
    } else {
        out[at + 1] = 0x82;
        out[at + 2] = (uint8_t)(length >> 8);
        out[at + 3] = (uint8_t)(length & 0xFFu);
    }
    if (length > 0) {
        memcpy(out + at + header, value, length);
    }
    return at + header + length;
}

enum tlv_status tlv_count(const uint8_t *data, size_t len, size_t *count)
{
    struct tlv_reader reader;
    struct tlv_item item;
    enum tlv_status status;
    *count = 0;
    tlv_reader_init(&reader, data, len);
    while ((status = tlv_next(&reader, &item)) == TLV_OK) {
        (*count)++;
    }
    return status == TLV_END ? TLV_OK : status;
}

/* The first record of `type`: TLV_OK, TLV_END when there is none, or what broke the blob
 * before it. */
enum tlv_status tlv_find(const uint8_t *data, size_t len, uint8_t type, struct tlv_item *item)
{
    struct tlv_reader reader;
    enum tlv_status status;
    tlv_reader_init(&reader, data, len);
    while ((status = tlv_next(&reader, item)) == TLV_OK) {
        if (item->type == type) {
            return TLV_OK;
        }
    }
    return status;
}

/* The config blob's fields; numbers are big-endian, text is printable ASCII. */
enum config_kind { CONFIG_TEXT, CONFIG_U8, CONFIG_U16, CONFIG_U32 };

struct config_field {
    uint8_t type;
    const char *key;
    enum config_kind kind;
};

static const struct config_field config_fields[] = {
    {0x01, "ssid", CONFIG_TEXT},     {0x02, "channel", CONFIG_U8}, {0x03, "interval", CONFIG_U16},
    {0x04, "serial", CONFIG_U32},    {0x05, "server", CONFIG_TEXT},
};

#define CONFIG_FIELDS (sizeof config_fields / sizeof config_fields[0])

static const struct config_field *config_field_of(uint8_t type)
{
    for (size_t i = 0; i < CONFIG_FIELDS; i++) {
        if (config_fields[i].type == type) {
            return &config_fields[i];
        }
    }
    return NULL;
}

static size_t config_width(enum config_kind kind)
{
    return kind == CONFIG_U8 ? 1 : kind == CONFIG_U16 ? 2 : kind == CONFIG_U32 ? 4 : 0;
}

static bool config_value_ok(const struct config_field *field, const struct tlv_item *item)
{
    if (field->kind != CONFIG_TEXT) {
        return item->length == config_width(field->kind);
    }
    if (item->length == 0 || item->length > KV_VALUE_MAX) {
        return false;
    }
    for (size_t i = 0; i < item->length; i++) {
        if (!isgraph(item->value[i])) {
            return false;
        }
    }
    return true;
}

/* The field's value as the kvstore holds it: the text, or the number in decimal. */
static void config_value_text(const struct config_field *field, const struct tlv_item *item,
                              char *out, size_t capacity)
{
    if (field->kind == CONFIG_TEXT) {
        snprintf(out, capacity, "%.*s", (int)item->length, (const char *)item->value);
        return;
    }
    uint32_t number = 0;
    for (size_t i = 0; i < item->length; i++) {
        number = number << 8 | item->value[i];
    }
    snprintf(out, capacity, "%lu", (unsigned long)number);
}

/* The whole blob is checked before any setting changes, so a bad blob changes nothing.
 * Types this build does not know are skipped: a newer cloud may send them. */
enum config_status config_blob_apply(const uint8_t *blob, size_t len, struct config_report *report)
{
    struct tlv_reader reader;
    struct tlv_item item;
    enum tlv_status status;
    memset(report, 0, sizeof *report);
    tlv_reader_init(&reader, blob, len);
    while ((status = tlv_next(&reader, &item)) == TLV_OK) {
        const struct config_field *field = config_field_of(item.type);
        if (field != NULL && !config_value_ok(field, &item)) {
            report->bad_type = item.type;
            return CONFIG_BAD_FIELD;
        }
    }
    if (status != TLV_END) {
        return CONFIG_MALFORMED;
    }
    tlv_reader_init(&reader, blob, len);
    while (tlv_next(&reader, &item) == TLV_OK) {
        const struct config_field *field = config_field_of(item.type);
        char value[KV_VALUE_MAX + 1];
        if (field == NULL) {
            report->skipped++;
            continue;
        }
        config_value_text(field, &item, value, sizeof value);
        if (!kv_set(field->key, value)) {
            report->bad_type = item.type;
            return CONFIG_STORE_FULL;
        }
        report->applied++;
    }
    return CONFIG_OK;
}

/* The settings of the kvstore that the blob has fields for, in the fields' order. A setting
 * whose value does not fit its field stops the build: the cloud must not get half of it. */
enum config_status config_blob_build(uint8_t *out, size_t capacity, size_t *len,
                                     struct config_report *report)
{
    size_t at = 0;
    memset(report, 0, sizeof *report);
    *len = 0;
    for (size_t i = 0; i < CONFIG_FIELDS; i++) {
        const struct config_field *field = &config_fields[i];
        const char *text = kv_get(field->key);
        uint8_t value[4];
        const uint8_t *bytes = value;
        size_t width = config_width(field->kind);
        if (text == NULL) {
            continue;
        }
        if (field->kind == CONFIG_TEXT) {
            bytes = (const uint8_t *)text;
            width = strlen(text);
            if (width == 0) {
                report->bad_type = field->type;
                return CONFIG_BAD_FIELD;
            }
        } else {
            long number = 0;
            uint64_t limit = (1ull << (8 * width)) - 1;
            if (!parse_long(text, &number) || number < 0 || (uint64_t)number > limit) {
                report->bad_type = field->type;
                return CONFIG_BAD_FIELD;
            }
            for (size_t k = 0; k < width; k++) {
                value[k] = (uint8_t)((uint64_t)number >> (8 * (width - 1 - k)));
            }
        }
        size_t next = tlv_put(out, capacity, at, field->type, bytes, width);
        if (next == 0) {
            return CONFIG_NO_ROOM;
        }
        at = next;
        report->applied++;
    }
    *len = at;
    return CONFIG_OK;
}

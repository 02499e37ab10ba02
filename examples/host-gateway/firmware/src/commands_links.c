/* The console's commands of the framing, field-bus and provisioning modules: the simple
 * checksums, varints, SLIP, Modbus RTU, TLV records and the config blob. */
#include <string.h>

#include "gateway.h"

#define MAX_BYTES CONSOLE_MAX_BYTES

/* A number of the console no bigger than `limit`. */
static bool number_upto(const char *text, uint32_t limit, uint32_t *value)
{
    return parse_u32(text, value) && *value <= limit;
}

static void cmd_sums(char **words, size_t n)
{
    uint8_t bytes[MAX_BYTES];
    size_t len = 0;
    if (n < 2 || !bytes_of(words, n, bytes, &len)) {
        usage("fletcher16|adler32|inetsum|lrc HEX...");
        return;
    }
    if (strcmp(words[0], "fletcher16") == 0) {
        reply("%04x", fletcher16(bytes, len));
    } else if (strcmp(words[0], "adler32") == 0) {
        reply("%08lx", (unsigned long)adler32(bytes, len));
    } else if (strcmp(words[0], "inetsum") == 0) {
        reply("%04x", internet_checksum(bytes, len));
    } else {
        reply("%02x", lrc8(bytes, len));
    }
}

static void cmd_nmea(char **words, size_t n)
{
    uint8_t computed = 0;
    if (n < 2) {
        usage("nmea SENTENCE");
        return;
    }
    switch (nmea_verify(rest_of_line(words, n), &computed)) {
    case NMEA_OK:
        reply("OK %02X", computed);
        break;
    case NMEA_NO_START:
        reply("ERR no $");
        break;
    case NMEA_NO_CHECKSUM:
        reply("ERR no checksum, computed %02X", computed);
        break;
    case NMEA_BAD_CHECKSUM:
        reply("ERR checksum, computed %02X", computed);
        break;
    }
}

static void cmd_varint(char **words, size_t n)
{
    long value = 0;
    bool zigzag = strcmp(words[0], "svarint") == 0;
    uint8_t out[VARINT_MAX_BYTES];
    if (n != 2 || !parse_long(words[1], &value) || (!zigzag && value < 0)) {
        usage("varint N | svarint N");
        return;
    }
    uint64_t raw = zigzag ? zigzag_encode(value) : (uint64_t)value;
    reply_hex(out, varint_encode(raw, out, sizeof out));
}

static void cmd_unvarint(char **words, size_t n)
{
    uint8_t bytes[MAX_BYTES];
    size_t len = 0;
    bool zigzag = strcmp(words[0], "unsvarint") == 0;
    struct reply_line line;
    if (n < 2 || !bytes_of(words, n, bytes, &len) || len == 0) {
        usage("unvarint|unsvarint HEX...");
        return;
    }
    reply_line_init(&line);
    for (size_t at = 0; at < len;) {
        uint64_t value = 0;
        enum varint_status status = VARINT_OK;
        size_t used = varint_decode(bytes + at, len - at, &value, &status);
        if (status != VARINT_OK) {
            reply(status == VARINT_TRUNCATED ? "ERR truncated at byte %zu"
                                             : "ERR overlong at byte %zu",
                  at);
            return;
        }
        if (zigzag) {
            reply_line_add(&line, "%lld", (long long)zigzag_decode(value));
        } else {
            reply_line_add(&line, "%llu", (unsigned long long)value);
        }
        at += used;
    }
    reply_line_send(&line);
}

static const char *slip_error(enum slip_status status)
{
    switch (status) {
    case SLIP_UNTERMINATED:
        return "ERR unterminated frame";
    case SLIP_BAD_ESCAPE:
        return "ERR bad escape";
    case SLIP_TOO_LONG:
        return "ERR frame too long";
    case SLIP_TRAILING:
        return "ERR bytes after the frame";
    case SLIP_OK:
        break;
    }
    return "OK";
}

static void cmd_slip(char **words, size_t n)
{
    uint8_t bytes[MAX_BYTES];
    uint8_t out[MAX_BYTES];
    size_t len = 0;
    if (n < 2 || !bytes_of(words, n, bytes, &len)) {
        usage("slip|unslip HEX...");
        return;
    }
    if (strcmp(words[0], "slip") == 0) {
        size_t done = slip_encode(bytes, len, out, sizeof out);
        if (done == 0) {
            reply("ERR frame too long");
        } else {
            reply_hex(out, done);
        }
        return;
    }
    enum slip_status status = SLIP_OK;
    size_t done = slip_decode(bytes, len, out, SLIP_FRAME_MAX, &status);
    if (status != SLIP_OK) {
        reply("%s", slip_error(status));
    } else if (done == 0) {
        reply("empty");
    } else {
        reply_hex(out, done);
    }
}

/* The sensor bus's receiver, fed from the console: it keeps a frame cut between two feeds. */
static struct slip_receiver bus_rx;

static void cmd_slipfeed(char **words, size_t n)
{
    uint8_t bytes[MAX_BYTES];
    size_t len = 0;
    struct reply_line line;
    if (strcmp(words[0], "slipstat") == 0 && n == 1) {
        reply("frames %lu errors %lu", (unsigned long)bus_rx.frames, (unsigned long)bus_rx.errors);
        return;
    }
    if (strcmp(words[0], "slipreset") == 0 && n == 1) {
        slip_receiver_init(&bus_rx);
        reply("OK");
        return;
    }
    if (strcmp(words[0], "slipfeed") != 0 || n < 2 || !bytes_of(words, n, bytes, &len)) {
        usage("slipfeed HEX... | slipstat | slipreset");
        return;
    }
    reply_line_init(&line);
    for (size_t i = 0; i < len; i++) {
        enum slip_event event = slip_receive(&bus_rx, bytes[i]);
        if (event == SLIP_FRAME) {
            char text[2 * SLIP_FRAME_MAX + 1];
            format_hex(bus_rx.frame, bus_rx.frame_len, text, sizeof text);
            reply_line_add(&line, "%s", text);
        } else if (event == SLIP_ERROR) {
            reply_line_add(&line, "!");
        }
    }
    if (line.len == 0 && line.dropped == 0) {
        reply("pending %zu", bus_rx.len);
    } else {
        reply_line_send(&line);
    }
}

static void cmd_mbframe(char **words, size_t n)
{
    uint8_t bytes[MAX_BYTES + 2];
    size_t len = 0;
    if (n < 2 || !bytes_of(words, n, bytes, &len) || len == 0) {
        usage("mbcrc|mbframe HEX...");
        return;
    }
    if (strcmp(words[0], "mbcrc") == 0) {
        reply("%04x", modbus_crc16(bytes, len));
        return;
    }
    reply_hex(bytes, modbus_seal(bytes, len, sizeof bytes));
}

static void cmd_mbread(char **words, size_t n)
{
    uint32_t slave = 0;
    uint32_t start = 0;
    uint32_t count = 0;
    uint8_t out[8];
    if (n != 4 || !number_upto(words[1], 247, &slave) || !number_upto(words[2], 0xFFFF, &start) ||
        !number_upto(words[3], 0xFFFF, &count)) {
        usage("mbread SLAVE START COUNT");
        return;
    }
    size_t len = modbus_read_request((uint8_t)slave, (uint16_t)start, (uint16_t)count, out, sizeof out);
    reply_hex(out, len);
}

static void cmd_mbslave(char **words, size_t n)
{
    uint8_t request[MAX_BYTES];
    uint8_t response[MAX_BYTES];
    size_t len = 0;
    size_t response_len = 0;
    if (n < 2 || !bytes_of(words, n, request, &len)) {
        usage("mbslave HEX...");
        return;
    }
    switch (modbus_slave_handle(request, len, response, sizeof response, &response_len)) {
    case MODBUS_ANSWERED:
        reply_hex(response, response_len);
        break;
    case MODBUS_BROADCAST:
        reply("OK broadcast");
        break;
    case MODBUS_NOT_OURS:
        reply("ERR not ours");
        break;
    case MODBUS_BAD_CRC:
        reply("ERR bad crc");
        break;
    case MODBUS_TOO_SHORT:
        reply("ERR too short");
        break;
    }
}

static void cmd_mbslave_state(char **words, size_t n)
{
    uint32_t number = 0;
    uint16_t value = 0;
    if (strcmp(words[0], "mbaddr") == 0 && n == 2 && number_upto(words[1], 247, &number) &&
        number > 0) {
        modbus_slave_reset((uint8_t)number);
        reply("OK");
    } else if (strcmp(words[0], "mbaddr") == 0 && n == 1) {
        reply("%u", modbus_slave_address());
    } else if (strcmp(words[0], "mbreg") == 0 && n == 2 && parse_u32(words[1], &number) &&
               modbus_register(number, &value)) {
        reply("%u", value);
    } else {
        usage("mbaddr [1..247] | mbreg INDEX");
    }
}

static void cmd_mbparse(char **words, size_t n)
{
    uint8_t frame[MAX_BYTES];
    uint16_t values[MAX_BYTES / 2];
    size_t len = 0;
    size_t count = 0;
    uint8_t exception = 0;
    struct reply_line line;
    if (n < 2 || !bytes_of(words, n, frame, &len)) {
        usage("mbparse HEX...");
        return;
    }
    switch (modbus_parse_read_reply(frame, len, values, MAX_BYTES / 2, &count, &exception)) {
    case MODBUS_REPLY_VALUES:
        reply_line_init(&line);
        reply_line_add(&line, "slave %u:", frame[0]);
        for (size_t i = 0; i < count; i++) {
            reply_line_add(&line, "%u", values[i]);
        }
        reply_line_send(&line);
        break;
    case MODBUS_REPLY_EXCEPTION:
        reply("slave %u: exception %u", frame[0], exception);
        break;
    case MODBUS_REPLY_BAD_CRC:
        reply("ERR bad crc");
        break;
    case MODBUS_REPLY_MALFORMED:
        reply("ERR malformed");
        break;
    }
}

static const char *tlv_error(enum tlv_status status)
{
    return status == TLV_TRUNCATED ? "ERR truncated" : "ERR bad length";
}

static void cmd_tlv(char **words, size_t n)
{
    uint8_t bytes[MAX_BYTES];
    size_t len = 0;
    uint32_t type = 0;
    bool typed = strcmp(words[0], "tlvcount") != 0;
    if (typed ? (n < 2 || !number_upto(words[1], 0xFF, &type) ||
                 !bytes_of(words + 1, n - 1, bytes, &len))
              : (n < 2 || !bytes_of(words, n, bytes, &len))) {
        usage("tlvput TYPE [HEX...] | tlvcount HEX... | tlvfind TYPE HEX...");
        return;
    }
    if (strcmp(words[0], "tlvput") == 0) {
        uint8_t out[MAX_BYTES + 4];
        reply_hex(out, tlv_put(out, sizeof out, 0, (uint8_t)type, bytes, len));
        return;
    }
    if (!typed) {
        size_t count = 0;
        enum tlv_status status = tlv_count(bytes, len, &count);
        if (status != TLV_OK) {
            reply("%s after %zu", tlv_error(status), count);
        } else {
            reply("%zu", count);
        }
        return;
    }
    struct tlv_item item;
    enum tlv_status status = tlv_find(bytes, len, (uint8_t)type, &item);
    if (status == TLV_END) {
        reply("ERR no type %lu", (unsigned long)type);
    } else if (status != TLV_OK) {
        reply("%s", tlv_error(status));
    } else if (item.length == 0) {
        reply("empty");
    } else {
        reply_hex(item.value, item.length);
    }
}

static void cmd_config(char **words, size_t n)
{
    uint8_t bytes[MAX_BYTES];
    size_t len = 0;
    struct config_report report;
    enum config_status status;
    if (strcmp(words[0], "cfgsave") == 0 && n == 1) {
        status = config_blob_build(bytes, sizeof bytes, &len, &report);
        if (status == CONFIG_OK && len == 0) {
            reply("empty");
        } else if (status == CONFIG_OK) {
            reply_hex(bytes, len);
        } else if (status == CONFIG_BAD_FIELD) {
            reply("ERR bad value for type %u", report.bad_type);
        } else {
            reply("ERR blob too long");
        }
        return;
    }
    if (strcmp(words[0], "cfgload") != 0 || n < 2 || !bytes_of(words, n, bytes, &len)) {
        usage("cfgload HEX... | cfgsave");
        return;
    }
    status = config_blob_apply(bytes, len, &report);
    switch (status) {
    case CONFIG_OK:
        reply("OK %zu applied %zu skipped", report.applied, report.skipped);
        break;
    case CONFIG_MALFORMED:
        reply("ERR malformed blob");
        break;
    case CONFIG_BAD_FIELD:
        reply("ERR bad value for type %u", report.bad_type);
        break;
    case CONFIG_STORE_FULL:
    case CONFIG_NO_ROOM:
        reply("ERR store full at type %u", report.bad_type);
        break;
    }
}

struct command {
    const char *name;
    void (*run)(char **words, size_t n);
};

static const struct command table[] = {
    {"fletcher16", cmd_sums},    {"adler32", cmd_sums},      {"inetsum", cmd_sums},
    {"lrc", cmd_sums},           {"nmea", cmd_nmea},         {"varint", cmd_varint},
    {"svarint", cmd_varint},     {"unvarint", cmd_unvarint}, {"unsvarint", cmd_unvarint},
    {"slip", cmd_slip},          {"unslip", cmd_slip},       {"slipfeed", cmd_slipfeed},
    {"slipstat", cmd_slipfeed},  {"slipreset", cmd_slipfeed}, {"mbcrc", cmd_mbframe},
    {"mbframe", cmd_mbframe},    {"mbread", cmd_mbread},     {"mbslave", cmd_mbslave},
    {"mbaddr", cmd_mbslave_state}, {"mbreg", cmd_mbslave_state}, {"mbparse", cmd_mbparse},
    {"tlvput", cmd_tlv},         {"tlvcount", cmd_tlv},      {"tlvfind", cmd_tlv},
    {"cfgload", cmd_config},     {"cfgsave", cmd_config},
};

/* False when words[0] is none of this file's commands. */
bool commands_links_execute(char **words, size_t n)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(words[0], table[i].name) == 0) {
            table[i].run(words, n);
            return true;
        }
    }
    return false;
}

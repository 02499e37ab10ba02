/* Modbus RTU on the field bus. As master the gateway builds read requests and checks the
 * replies; as slave it serves its own MODBUS_REGISTERS holding registers with functions 03
 * (read holding registers), 06 (write single register) and 16 (write multiple registers).
 * A frame is the address, the PDU (function code and data) and the CRC-16/MODBUS, whose low
 * byte goes first. Checks follow the order of the Modbus application protocol's state
 * diagrams: function, then quantity (exception 3), then address range (exception 2). */
#include <string.h>

#include "gateway.h"

#define FC_READ_HOLDING 0x03
#define FC_WRITE_SINGLE 0x06
#define FC_WRITE_MULTIPLE 0x10
#define EXCEPTION_FLAG 0x80
#define MAX_READ_COUNT 125
#define MAX_WRITE_COUNT 123
#define BROADCAST 0
/* address, function, the smallest data (an exception code), CRC */
#define MIN_FRAME 4

static uint16_t registers[MODBUS_REGISTERS];
static uint8_t own_address = 1;

uint16_t modbus_crc16(const uint8_t *data, size_t len)
{
    uint16_t crc = 0xFFFF;
    for (size_t i = 0; i < len; i++) {
        crc ^= data[i];
        for (int bit = 0; bit < 8; bit++) {
            crc = (crc & 1u) ? (uint16_t)((crc >> 1) ^ 0xA001u) : (uint16_t)(crc >> 1);
        }
    }
    return crc;
}

static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static void put_u16(uint8_t *p, uint16_t value)
{
    p[0] = (uint8_t)(value >> 8);
    p[1] = (uint8_t)(value & 0xFFu);
}

/* Appends the CRC to frame[0 .. len): the sealed length, or 0 when it does not fit. */
size_t modbus_seal(uint8_t *frame, size_t len, size_t capacity)
{
    if (len + 2 > capacity) {
        return 0;
    }
    uint16_t crc = modbus_crc16(frame, len);
    frame[len] = (uint8_t)(crc & 0xFFu);
    frame[len + 1] = (uint8_t)(crc >> 8);
    return len + 2;
}

bool modbus_crc_ok(const uint8_t *frame, size_t len)
{
    if (len < 3) {
        return false;
    }
    uint16_t crc = modbus_crc16(frame, len - 2);
    return frame[len - 2] == (crc & 0xFFu) && frame[len - 1] == (crc >> 8);
}

size_t modbus_read_request(uint8_t slave, uint16_t start, uint16_t count, uint8_t *out,
                           size_t capacity)
{
    if (capacity < 8) {
        return 0;
    }
    out[0] = slave;
    out[1] = FC_READ_HOLDING;
    put_u16(out + 2, start);
    put_u16(out + 4, count);
    return modbus_seal(out, 6, capacity);
}

void modbus_slave_reset(uint8_t address)
{
    own_address = address;
    memset(registers, 0, sizeof registers);
}

uint8_t modbus_slave_address(void)
{
    return own_address;
}

bool modbus_register(size_t index, uint16_t *value)
{
    if (index >= MODBUS_REGISTERS) {
        return false;
    }
    *value = registers[index];
    return true;
}

/* Each function serves pdu[0 .. len) into out (at most `capacity` bytes) and returns 0, or
 * the exception code to answer with. */
static uint8_t read_holding(const uint8_t *pdu, size_t len, uint8_t *out, size_t capacity,
                            size_t *out_len)
{
    if (len != 5) {
        return MODBUS_ILLEGAL_VALUE;
    }
    uint16_t start = get_u16(pdu + 1);
    uint16_t count = get_u16(pdu + 3);
    if (count < 1 || count > MAX_READ_COUNT) {
        return MODBUS_ILLEGAL_VALUE;
    }
    if ((uint32_t)start + count > MODBUS_REGISTERS) {
        return MODBUS_ILLEGAL_ADDRESS;
    }
    if (2u + 2u * count > capacity) {
        return MODBUS_DEVICE_FAILURE;
    }
    out[0] = FC_READ_HOLDING;
    out[1] = (uint8_t)(2 * count);
    for (uint16_t i = 0; i < count; i++) {
        put_u16(out + 2 + 2 * i, registers[start + i]);
    }
    *out_len = 2u + 2u * count;
    return 0;
}

static uint8_t write_single(const uint8_t *pdu, size_t len, uint8_t *out, size_t capacity,
                            size_t *out_len)
{
    if (len != 5) {
        return MODBUS_ILLEGAL_VALUE;
    }
    uint16_t address = get_u16(pdu + 1);
    if (address >= MODBUS_REGISTERS) {
        return MODBUS_ILLEGAL_ADDRESS;
    }
    if (capacity < len) {
        return MODBUS_DEVICE_FAILURE;
    }
    registers[address] = get_u16(pdu + 3);
    memcpy(out, pdu, len); /* the answer echoes the request */
    *out_len = len;
    return 0;
}

static uint8_t write_multiple(const uint8_t *pdu, size_t len, uint8_t *out, size_t capacity,
                              size_t *out_len)
{
    if (len < 6) {
        return MODBUS_ILLEGAL_VALUE;
    }
    uint16_t start = get_u16(pdu + 1);
    uint16_t count = get_u16(pdu + 3);
    uint8_t byte_count = pdu[5];
    if (count < 1 || count > MAX_WRITE_COUNT || byte_count != 2 * count ||
        len != 6u + byte_count) {
        return MODBUS_ILLEGAL_VALUE;
    }
    if ((uint32_t)start + count > MODBUS_REGISTERS) {
        return MODBUS_ILLEGAL_ADDRESS;
    }
    if (capacity < 5) {
        return MODBUS_DEVICE_FAILURE;
    }
    for (uint16_t i = 0; i < count; i++) {
        registers[start + i] = get_u16(pdu + 6 + 2 * i);
    }
    memcpy(out, pdu, 5); /* function, start, count */
    *out_len = 5;
    return 0;
}

static uint8_t serve(const uint8_t *pdu, size_t len, uint8_t *out, size_t capacity,
                     size_t *out_len)
{
    switch (pdu[0]) {
    case FC_READ_HOLDING:
        return read_holding(pdu, len, out, capacity, out_len);
    case FC_WRITE_SINGLE:
        return write_single(pdu, len, out, capacity, out_len);
    case FC_WRITE_MULTIPLE:
        return write_multiple(pdu, len, out, capacity, out_len);
    default:
        return MODBUS_ILLEGAL_FUNCTION;
    }
}

/* A request off the bus. A frame with a bad CRC or for another slave gets no answer (the bus
 * master times out); a broadcast is carried out but never answered. */
enum modbus_result modbus_slave_handle(const uint8_t *request, size_t len, uint8_t *response,
                                       size_t capacity, size_t *response_len)
{
    *response_len = 0;
    if (len < MIN_FRAME) {
        return MODBUS_TOO_SHORT;
    }
    if (!modbus_crc_ok(request, len)) {
        return MODBUS_BAD_CRC;
    }
    uint8_t address = request[0];
    if (address != own_address && address != BROADCAST) {
        return MODBUS_NOT_OURS;
    }
    if (capacity < 1 + 2 + 2) {
        return MODBUS_TOO_SHORT;
    }
    const uint8_t *pdu = request + 1;
    size_t pdu_len = len - 3;
    size_t body_len = 0;
    /* room for the address before the PDU and the CRC after it */
    uint8_t exception = serve(pdu, pdu_len, response + 1, capacity - 3, &body_len);
    if (address == BROADCAST) {
        return MODBUS_BROADCAST;
    }
    response[0] = own_address;
    if (exception != 0) {
        response[1] = (uint8_t)(pdu[0] | EXCEPTION_FLAG);
        response[2] = exception;
        body_len = 2;
    }
    *response_len = modbus_seal(response, 1 + body_len, capacity);
    return MODBUS_ANSWERED;
}

/* A slave's answer to a read of holding registers: its values, or its exception code. */
enum modbus_reply modbus_parse_read_reply(const uint8_t *frame, size_t len, uint16_t *values,
                                          size_t capacity, size_t *count, uint8_t *exception)
{
    *count = 0;
    *exception = 0;
    if (len < MIN_FRAME + 1) {
        return MODBUS_REPLY_MALFORMED;
    }
    if (!modbus_crc_ok(frame, len)) {
        return MODBUS_REPLY_BAD_CRC;
    }
    uint8_t function = frame[1];
    if (function == (FC_READ_HOLDING | EXCEPTION_FLAG)) {
        if (len != 5) {
            return MODBUS_REPLY_MALFORMED;
        }
        *exception = frame[2];
        return MODBUS_REPLY_EXCEPTION;
    }
    size_t byte_count = frame[2];
    if (function != FC_READ_HOLDING || byte_count == 0 || byte_count % 2 != 0 ||
        len != 3 + byte_count + 2 || byte_count / 2 > capacity) {
        return MODBUS_REPLY_MALFORMED;
    }
    for (size_t i = 0; i < byte_count / 2; i++) {
        values[i] = get_u16(frame + 3 + 2 * i);
    }
    *count = byte_count / 2;
    return MODBUS_REPLY_VALUES;
}

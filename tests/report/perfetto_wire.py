"""Perfetto's trace format (protobuf) read back for tests, by wire type: the test names the field
numbers it expects, from Perfetto's protos/perfetto/trace/ (trace_packet.proto,
track_descriptor.proto, track_event/track_event.proto, ...)."""


def proto_fields(buf):
    """[(field, value)] of a protobuf message: ints for varints, bytes for length-delimited."""
    out, i = [], 0

    def varint():
        nonlocal i
        v, shift = 0, 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v

    while i < len(buf):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            out.append((field, varint()))
        elif wire == 2:
            n = varint()
            out.append((field, buf[i:i + n]))
            i += n
        elif wire == 1:
            out.append((field, buf[i:i + 8]))
            i += 8
        else:
            raise AssertionError("unexpected wire type %d" % wire)
    assert i == len(buf)
    return out


def one(fields, number, default=None):
    values = [v for f, v in fields if f == number]
    assert len(values) <= 1, (number, values)
    return values[0] if values else default

"""The FP4 index-cache format, written down as data.

E2M1 values with one UE8M0 (power-of-two) scale per 32 elements. A key is 128
elements: 64 payload bytes + 4 scale bytes = 68 bytes. Keys are stored per
64-token page in a 4352-byte *section* that sits inside a larger merged MLA
page (see ``docs/layouts.md``):

    payload byte b (0..15) of group g (0..3) of token t (0..63):  g*1024 + t*16 + b
    scale of group g of token t:                                   4096 + g*64 + (t % 16)*4 + t // 16

Element ``2i`` of a group sits in the low nibble of byte ``i``, ``2i + 1`` in the
high nibble. Nibble bit 3 is the sign, bits 2..0 the magnitude code.
"""

HEAD_DIM = 128
GROUP_SIZE = 32
GROUPS = HEAD_DIM // GROUP_SIZE  # 4
GROUP_BYTES = GROUP_SIZE // 2  # 16 payload bytes per (token, group)
PAYLOAD_BYTES = HEAD_DIM // 2  # 64 per token
BYTES_PER_TOKEN = PAYLOAD_BYTES + GROUPS  # 68

PAGE_TOKENS = 64
SECTION_PAYLOAD_BYTES = PAGE_TOKENS * PAYLOAD_BYTES  # 4096
SECTION_BYTES = PAGE_TOKENS * BYTES_PER_TOKEN  # 4352
GROUP_PLANE_BYTES = PAGE_TOKENS * GROUP_BYTES  # 1024: one group of all 64 tokens
SCALE_PLANE_BYTES = PAGE_TOKENS  # 64 scale bytes per group

# E2M1 magnitude code -> value. Codes 8..15 are the same magnitudes, negated.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MAX = 6.0
# Rounding to the nearest E2M1 value, ties to the even code: the code is the
# number of thresholds the magnitude passes. ">" at a tie keeps the lower code
# (0.25 -> 0, 1.25 -> 1.0, 2.5 -> 2.0, 5 -> 4.0), ">=" takes the upper one
# (0.75 -> 1.0, 1.75 -> 2.0, 3.5 -> 4.0).
E2M1_THRESHOLDS_GT = (0.25, 1.25, 2.5, 5.0)
E2M1_THRESHOLDS_GE = (0.75, 1.75, 3.5)

# UE8M0: byte b stands for 2**(b - 127); 255 is NaN.
UE8M0_BIAS = 127
UE8M0_NAN = 255
UE8M0_MAX_FINITE = 254
# The scale rule clamps amax to 2**-120 so an all-zero group gets a finite scale.
AMAX_FLOOR = 2.0**-120

# Queries: scales laid out as AITER's pre-shuffled [rows, 1, 4, 16, 4]:
# head h, group g at [r, 0, g, h % 16, h // 16]; unused slots (h // 16 >= H // 16) hold 127.
QUERY_HEADS = (16, 32, 64)
QUERY_SCALE_LANES = 16
QUERY_SCALE_SLOTS = 4
QUERY_SCALE_FILL = 127


def section_payload_offset(token: int, group: int, byte: int) -> int:
    """Byte offset of payload byte ``byte`` of ``group`` of ``token`` inside a section."""
    return group * GROUP_PLANE_BYTES + token * GROUP_BYTES + byte


def section_scale_offset(token: int, group: int) -> int:
    """Byte offset of the scale of ``group`` of ``token`` inside a section.

    Four tokens ``t, t+16, t+32, t+48`` share one 32-bit word, the order in which
    AITER's reader loads them.
    """
    return SECTION_PAYLOAD_BYTES + group * SCALE_PLANE_BYTES + (token % 16) * 4 + token // 16

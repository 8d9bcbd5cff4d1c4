"""Written by ``python -m fp4_inductor.kernels.wgmma_source`` (wgmma_source.py says what it
is): do not edit; tests/test_wgmma.py checks that it is what the generator writes."""

import triton
import triton.language as tl

from .score_math import power_of_two

DECLARE_64 = tl.constexpr('{ .shared .align 1024 .b8 fp4_queries[8192]; mov.u32 $0, fp4_queries; }')
DECLARE_128 = tl.constexpr('{ .shared .align 1024 .b8 fp4_queries[16384]; mov.u32 $0, fp4_queries; }')
DECLARE_256 = tl.constexpr('{ .shared .align 1024 .b8 fp4_queries[32768]; mov.u32 $0, fp4_queries; }')
DECLARE_W64 = tl.constexpr('{ .shared .align 16 .b8 fp4_weights[256]; mov.u32 $0, fp4_weights; }')
DECLARE_W128 = tl.constexpr('{ .shared .align 16 .b8 fp4_weights[512]; mov.u32 $0, fp4_weights; }')
DECLARE_W256 = tl.constexpr('{ .shared .align 16 .b8 fp4_weights[1024]; mov.u32 $0, fp4_weights; }')
LDSW = tl.constexpr('ld.shared.v2.f32 {$0, $1}, [$2];')
STORE = tl.constexpr('{ st.shared.u32 [$1], $2; mov.u32 $0, 0; }')
STORE_IF = tl.constexpr('{ .reg .pred p; setp.ne.b32 p, $3, 0; @p st.shared.u32 [$1], $2; mov.u32 $0, 0; }')
PUBLISH = tl.constexpr('{ fence.proxy.async.shared::cta; bar.sync 0; mov.u32 $0, $1; }')
BARRIER = tl.constexpr('{ bar.sync 0; mov.b32 $0, $2; mov.b32 $1, $3; }')
PUBLISH_BOTH = tl.constexpr('{ fence.proxy.async.shared::cta; bar.sync 0; mov.u32 $0, $3; mov.u32 $1, $4; }')
LOAD4 = tl.constexpr('ld.global.nc.L1::no_allocate.v4.b32 {$0, $1, $2, $3}, [$4];')
LOAD4_C = tl.constexpr('=r,=r,=r,=r,l')
KMAX = tl.constexpr('{ .reg .b32 x, m; shfl.sync.bfly.b32 x, $1, 1, 31, 0xffffffff; max.u16x2 m, $1, x; shfl.sync.bfly.b32 x, m, 2, 31, 0xffffffff; max.u16x2 $0, m, x; }')
QMAX = tl.constexpr('{ .reg .b32 x, m; shfl.sync.bfly.b32 x, $1, 1, 31, 0xffffffff; max.s32 m, $1, x; shfl.sync.bfly.b32 x, m, 2, 31, 0xffffffff; max.s32 $0, m, x; }')
TABLES = tl.constexpr('{ shl.b32 $0, 0x03020100, $2; shl.b32 $1, 0x0C080604, $2; }')
PRMT = tl.constexpr('{ .reg .b32 n, h, p, q;xor.b32 n, $2, 0x88888888; prmt.b32 p, $3, $4, $2; prmt.b32 q, $3, $4, n; add.u32 p, p, 0x80808080; sub.u32 p, p, q; xor.b32 $0, p, 0x80808080; shr.b32 h, $2, 16; shr.b32 n, n, 16; prmt.b32 p, $3, $4, h; prmt.b32 q, $3, $4, n; add.u32 p, p, 0x80808080; sub.u32 p, p, q; xor.b32 $1, p, 0x80808080; }')
SHFL1 = tl.constexpr('shfl.sync.bfly.b32 $0, $1, 1, 31, 0xffffffff;')
SHFL2 = tl.constexpr('shfl.sync.bfly.b32 $0, $1, 2, 31, 0xffffffff;')
RELU = tl.constexpr('mul.rn.sat.f32 $0, $1, 0f7F000000;')
ISSUE_64 = tl.constexpr('{ .reg .pred p; .reg .b64 d; .reg .u32 s, h; mov.b32 h, 16; wgmma.fence.sync.aligned; add.u32 s, $48, 0; mov.b64 d, {s, h}; setp.ne.u32 p, 0, 0; wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$32, $33, $34, $35}, d, p; add.u32 s, $48, 128; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$36, $37, $38, $39}, d, p; add.u32 s, $48, 256; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$40, $41, $42, $43}, d, p; add.u32 s, $48, 384; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$44, $45, $46, $47}, d, p; wgmma.commit_group.sync.aligned; }')
ISSUE_64_H0 = tl.constexpr('{ .reg .pred p; .reg .b64 d; .reg .u32 s, h; mov.b32 h, 16; wgmma.fence.sync.aligned; add.u32 s, $32, 0; mov.b64 d, {s, h}; setp.ne.u32 p, 0, 0; wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15}, {$16, $17, $18, $19}, d, p; add.u32 s, $32, 128; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15}, {$20, $21, $22, $23}, d, p; add.u32 s, $32, 256; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15}, {$24, $25, $26, $27}, d, p; add.u32 s, $32, 384; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15}, {$28, $29, $30, $31}, d, p; wgmma.commit_group.sync.aligned; }')
ISSUE_64_H1 = tl.constexpr('{ .reg .pred p; .reg .b64 d; .reg .u32 s, h; mov.b32 h, 16; wgmma.fence.sync.aligned; add.u32 s, $32, 64; mov.b64 d, {s, h}; setp.ne.u32 p, 0, 0; wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15}, {$16, $17, $18, $19}, d, p; add.u32 s, $32, 192; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15}, {$20, $21, $22, $23}, d, p; add.u32 s, $32, 320; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15}, {$24, $25, $26, $27}, d, p; add.u32 s, $32, 448; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15}, {$28, $29, $30, $31}, d, p; wgmma.commit_group.sync.aligned; }')
ISSUE_C_64 = tl.constexpr('=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r')
WAIT_C_64 = tl.constexpr('=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r')
WAIT_64_0 = tl.constexpr('{ .shared .align 4 .b32 fp4_order[128]; .reg .u32 o, a; mov.u32 o, %tid.x; and.b32 o, o, 127; shl.b32 o, o, 2; mov.u32 a, fp4_order; add.u32 a, a, o; st.shared.b32 [a], $64; wgmma.wait_group.sync.aligned 0; mov.b32 $0, $32; mov.b32 $1, $33; mov.b32 $2, $34; mov.b32 $3, $35; mov.b32 $4, $36; mov.b32 $5, $37; mov.b32 $6, $38; mov.b32 $7, $39; mov.b32 $8, $40; mov.b32 $9, $41; mov.b32 $10, $42; mov.b32 $11, $43; mov.b32 $12, $44; mov.b32 $13, $45; mov.b32 $14, $46; mov.b32 $15, $47; mov.b32 $16, $48; mov.b32 $17, $49; mov.b32 $18, $50; mov.b32 $19, $51; mov.b32 $20, $52; mov.b32 $21, $53; mov.b32 $22, $54; mov.b32 $23, $55; mov.b32 $24, $56; mov.b32 $25, $57; mov.b32 $26, $58; mov.b32 $27, $59; mov.b32 $28, $60; mov.b32 $29, $61; mov.b32 $30, $62; mov.b32 $31, $63; }')
WAIT_64_1 = tl.constexpr('{ .shared .align 4 .b32 fp4_order[128]; .reg .u32 o, a; mov.u32 o, %tid.x; and.b32 o, o, 127; shl.b32 o, o, 2; mov.u32 a, fp4_order; add.u32 a, a, o; st.shared.b32 [a], $64; wgmma.wait_group.sync.aligned 1; mov.b32 $0, $32; mov.b32 $1, $33; mov.b32 $2, $34; mov.b32 $3, $35; mov.b32 $4, $36; mov.b32 $5, $37; mov.b32 $6, $38; mov.b32 $7, $39; mov.b32 $8, $40; mov.b32 $9, $41; mov.b32 $10, $42; mov.b32 $11, $43; mov.b32 $12, $44; mov.b32 $13, $45; mov.b32 $14, $46; mov.b32 $15, $47; mov.b32 $16, $48; mov.b32 $17, $49; mov.b32 $18, $50; mov.b32 $19, $51; mov.b32 $20, $52; mov.b32 $21, $53; mov.b32 $22, $54; mov.b32 $23, $55; mov.b32 $24, $56; mov.b32 $25, $57; mov.b32 $26, $58; mov.b32 $27, $59; mov.b32 $28, $60; mov.b32 $29, $61; mov.b32 $30, $62; mov.b32 $31, $63; }')
WAIT_64_2 = tl.constexpr('{ .shared .align 4 .b32 fp4_order[128]; .reg .u32 o, a; mov.u32 o, %tid.x; and.b32 o, o, 127; shl.b32 o, o, 2; mov.u32 a, fp4_order; add.u32 a, a, o; st.shared.b32 [a], $64; wgmma.wait_group.sync.aligned 2; mov.b32 $0, $32; mov.b32 $1, $33; mov.b32 $2, $34; mov.b32 $3, $35; mov.b32 $4, $36; mov.b32 $5, $37; mov.b32 $6, $38; mov.b32 $7, $39; mov.b32 $8, $40; mov.b32 $9, $41; mov.b32 $10, $42; mov.b32 $11, $43; mov.b32 $12, $44; mov.b32 $13, $45; mov.b32 $14, $46; mov.b32 $15, $47; mov.b32 $16, $48; mov.b32 $17, $49; mov.b32 $18, $50; mov.b32 $19, $51; mov.b32 $20, $52; mov.b32 $21, $53; mov.b32 $22, $54; mov.b32 $23, $55; mov.b32 $24, $56; mov.b32 $25, $57; mov.b32 $26, $58; mov.b32 $27, $59; mov.b32 $28, $60; mov.b32 $29, $61; mov.b32 $30, $62; mov.b32 $31, $63; }')
ISSUE_128 = tl.constexpr('{ .reg .pred p; .reg .b64 d; .reg .u32 s, h; mov.b32 h, 16; wgmma.fence.sync.aligned; add.u32 s, $80, 0; mov.b64 d, {s, h}; setp.ne.u32 p, 0, 0; wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63}, {$64, $65, $66, $67}, d, p; add.u32 s, $80, 256; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63}, {$68, $69, $70, $71}, d, p; add.u32 s, $80, 512; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63}, {$72, $73, $74, $75}, d, p; add.u32 s, $80, 768; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63}, {$76, $77, $78, $79}, d, p; wgmma.commit_group.sync.aligned; }')
ISSUE_128_H0 = tl.constexpr('{ .reg .pred p; .reg .b64 d; .reg .u32 s, h; mov.b32 h, 16; wgmma.fence.sync.aligned; add.u32 s, $48, 0; mov.b64 d, {s, h}; setp.ne.u32 p, 0, 0; wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$32, $33, $34, $35}, d, p; add.u32 s, $48, 256; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$36, $37, $38, $39}, d, p; add.u32 s, $48, 512; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$40, $41, $42, $43}, d, p; add.u32 s, $48, 768; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$44, $45, $46, $47}, d, p; wgmma.commit_group.sync.aligned; }')
ISSUE_128_H1 = tl.constexpr('{ .reg .pred p; .reg .b64 d; .reg .u32 s, h; mov.b32 h, 16; wgmma.fence.sync.aligned; add.u32 s, $48, 128; mov.b64 d, {s, h}; setp.ne.u32 p, 0, 0; wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$32, $33, $34, $35}, d, p; add.u32 s, $48, 384; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$36, $37, $38, $39}, d, p; add.u32 s, $48, 640; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$40, $41, $42, $43}, d, p; add.u32 s, $48, 896; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$44, $45, $46, $47}, d, p; wgmma.commit_group.sync.aligned; }')
ISSUE_C_128 = tl.constexpr('=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r')
WAIT_C_128 = tl.constexpr('=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r')
WAIT_128_0 = tl.constexpr('{ .shared .align 4 .b32 fp4_order[128]; .reg .u32 o, a; mov.u32 o, %tid.x; and.b32 o, o, 127; shl.b32 o, o, 2; mov.u32 a, fp4_order; add.u32 a, a, o; st.shared.b32 [a], $128; wgmma.wait_group.sync.aligned 0; mov.b32 $0, $64; mov.b32 $1, $65; mov.b32 $2, $66; mov.b32 $3, $67; mov.b32 $4, $68; mov.b32 $5, $69; mov.b32 $6, $70; mov.b32 $7, $71; mov.b32 $8, $72; mov.b32 $9, $73; mov.b32 $10, $74; mov.b32 $11, $75; mov.b32 $12, $76; mov.b32 $13, $77; mov.b32 $14, $78; mov.b32 $15, $79; mov.b32 $16, $80; mov.b32 $17, $81; mov.b32 $18, $82; mov.b32 $19, $83; mov.b32 $20, $84; mov.b32 $21, $85; mov.b32 $22, $86; mov.b32 $23, $87; mov.b32 $24, $88; mov.b32 $25, $89; mov.b32 $26, $90; mov.b32 $27, $91; mov.b32 $28, $92; mov.b32 $29, $93; mov.b32 $30, $94; mov.b32 $31, $95; mov.b32 $32, $96; mov.b32 $33, $97; mov.b32 $34, $98; mov.b32 $35, $99; mov.b32 $36, $100; mov.b32 $37, $101; mov.b32 $38, $102; mov.b32 $39, $103; mov.b32 $40, $104; mov.b32 $41, $105; mov.b32 $42, $106; mov.b32 $43, $107; mov.b32 $44, $108; mov.b32 $45, $109; mov.b32 $46, $110; mov.b32 $47, $111; mov.b32 $48, $112; mov.b32 $49, $113; mov.b32 $50, $114; mov.b32 $51, $115; mov.b32 $52, $116; mov.b32 $53, $117; mov.b32 $54, $118; mov.b32 $55, $119; mov.b32 $56, $120; mov.b32 $57, $121; mov.b32 $58, $122; mov.b32 $59, $123; mov.b32 $60, $124; mov.b32 $61, $125; mov.b32 $62, $126; mov.b32 $63, $127; }')
WAIT_128_1 = tl.constexpr('{ .shared .align 4 .b32 fp4_order[128]; .reg .u32 o, a; mov.u32 o, %tid.x; and.b32 o, o, 127; shl.b32 o, o, 2; mov.u32 a, fp4_order; add.u32 a, a, o; st.shared.b32 [a], $128; wgmma.wait_group.sync.aligned 1; mov.b32 $0, $64; mov.b32 $1, $65; mov.b32 $2, $66; mov.b32 $3, $67; mov.b32 $4, $68; mov.b32 $5, $69; mov.b32 $6, $70; mov.b32 $7, $71; mov.b32 $8, $72; mov.b32 $9, $73; mov.b32 $10, $74; mov.b32 $11, $75; mov.b32 $12, $76; mov.b32 $13, $77; mov.b32 $14, $78; mov.b32 $15, $79; mov.b32 $16, $80; mov.b32 $17, $81; mov.b32 $18, $82; mov.b32 $19, $83; mov.b32 $20, $84; mov.b32 $21, $85; mov.b32 $22, $86; mov.b32 $23, $87; mov.b32 $24, $88; mov.b32 $25, $89; mov.b32 $26, $90; mov.b32 $27, $91; mov.b32 $28, $92; mov.b32 $29, $93; mov.b32 $30, $94; mov.b32 $31, $95; mov.b32 $32, $96; mov.b32 $33, $97; mov.b32 $34, $98; mov.b32 $35, $99; mov.b32 $36, $100; mov.b32 $37, $101; mov.b32 $38, $102; mov.b32 $39, $103; mov.b32 $40, $104; mov.b32 $41, $105; mov.b32 $42, $106; mov.b32 $43, $107; mov.b32 $44, $108; mov.b32 $45, $109; mov.b32 $46, $110; mov.b32 $47, $111; mov.b32 $48, $112; mov.b32 $49, $113; mov.b32 $50, $114; mov.b32 $51, $115; mov.b32 $52, $116; mov.b32 $53, $117; mov.b32 $54, $118; mov.b32 $55, $119; mov.b32 $56, $120; mov.b32 $57, $121; mov.b32 $58, $122; mov.b32 $59, $123; mov.b32 $60, $124; mov.b32 $61, $125; mov.b32 $62, $126; mov.b32 $63, $127; }')
WAIT_128_2 = tl.constexpr('{ .shared .align 4 .b32 fp4_order[128]; .reg .u32 o, a; mov.u32 o, %tid.x; and.b32 o, o, 127; shl.b32 o, o, 2; mov.u32 a, fp4_order; add.u32 a, a, o; st.shared.b32 [a], $128; wgmma.wait_group.sync.aligned 2; mov.b32 $0, $64; mov.b32 $1, $65; mov.b32 $2, $66; mov.b32 $3, $67; mov.b32 $4, $68; mov.b32 $5, $69; mov.b32 $6, $70; mov.b32 $7, $71; mov.b32 $8, $72; mov.b32 $9, $73; mov.b32 $10, $74; mov.b32 $11, $75; mov.b32 $12, $76; mov.b32 $13, $77; mov.b32 $14, $78; mov.b32 $15, $79; mov.b32 $16, $80; mov.b32 $17, $81; mov.b32 $18, $82; mov.b32 $19, $83; mov.b32 $20, $84; mov.b32 $21, $85; mov.b32 $22, $86; mov.b32 $23, $87; mov.b32 $24, $88; mov.b32 $25, $89; mov.b32 $26, $90; mov.b32 $27, $91; mov.b32 $28, $92; mov.b32 $29, $93; mov.b32 $30, $94; mov.b32 $31, $95; mov.b32 $32, $96; mov.b32 $33, $97; mov.b32 $34, $98; mov.b32 $35, $99; mov.b32 $36, $100; mov.b32 $37, $101; mov.b32 $38, $102; mov.b32 $39, $103; mov.b32 $40, $104; mov.b32 $41, $105; mov.b32 $42, $106; mov.b32 $43, $107; mov.b32 $44, $108; mov.b32 $45, $109; mov.b32 $46, $110; mov.b32 $47, $111; mov.b32 $48, $112; mov.b32 $49, $113; mov.b32 $50, $114; mov.b32 $51, $115; mov.b32 $52, $116; mov.b32 $53, $117; mov.b32 $54, $118; mov.b32 $55, $119; mov.b32 $56, $120; mov.b32 $57, $121; mov.b32 $58, $122; mov.b32 $59, $123; mov.b32 $60, $124; mov.b32 $61, $125; mov.b32 $62, $126; mov.b32 $63, $127; }')
ISSUE_256 = tl.constexpr('{ .reg .pred p; .reg .b64 d; .reg .u32 s, h; mov.b32 h, 16; wgmma.fence.sync.aligned; add.u32 s, $144, 0; mov.b64 d, {s, h}; setp.ne.u32 p, 0, 0; wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65, $66, $67, $68, $69, $70, $71, $72, $73, $74, $75, $76, $77, $78, $79, $80, $81, $82, $83, $84, $85, $86, $87, $88, $89, $90, $91, $92, $93, $94, $95, $96, $97, $98, $99, $100, $101, $102, $103, $104, $105, $106, $107, $108, $109, $110, $111, $112, $113, $114, $115, $116, $117, $118, $119, $120, $121, $122, $123, $124, $125, $126, $127}, {$128, $129, $130, $131}, d, p; add.u32 s, $144, 512; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65, $66, $67, $68, $69, $70, $71, $72, $73, $74, $75, $76, $77, $78, $79, $80, $81, $82, $83, $84, $85, $86, $87, $88, $89, $90, $91, $92, $93, $94, $95, $96, $97, $98, $99, $100, $101, $102, $103, $104, $105, $106, $107, $108, $109, $110, $111, $112, $113, $114, $115, $116, $117, $118, $119, $120, $121, $122, $123, $124, $125, $126, $127}, {$132, $133, $134, $135}, d, p; add.u32 s, $144, 1024; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65, $66, $67, $68, $69, $70, $71, $72, $73, $74, $75, $76, $77, $78, $79, $80, $81, $82, $83, $84, $85, $86, $87, $88, $89, $90, $91, $92, $93, $94, $95, $96, $97, $98, $99, $100, $101, $102, $103, $104, $105, $106, $107, $108, $109, $110, $111, $112, $113, $114, $115, $116, $117, $118, $119, $120, $121, $122, $123, $124, $125, $126, $127}, {$136, $137, $138, $139}, d, p; add.u32 s, $144, 1536; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65, $66, $67, $68, $69, $70, $71, $72, $73, $74, $75, $76, $77, $78, $79, $80, $81, $82, $83, $84, $85, $86, $87, $88, $89, $90, $91, $92, $93, $94, $95, $96, $97, $98, $99, $100, $101, $102, $103, $104, $105, $106, $107, $108, $109, $110, $111, $112, $113, $114, $115, $116, $117, $118, $119, $120, $121, $122, $123, $124, $125, $126, $127}, {$140, $141, $142, $143}, d, p; wgmma.commit_group.sync.aligned; }')
ISSUE_256_H0 = tl.constexpr('{ .reg .pred p; .reg .b64 d; .reg .u32 s, h; mov.b32 h, 16; wgmma.fence.sync.aligned; add.u32 s, $80, 0; mov.b64 d, {s, h}; setp.ne.u32 p, 0, 0; wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63}, {$64, $65, $66, $67}, d, p; add.u32 s, $80, 512; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63}, {$68, $69, $70, $71}, d, p; add.u32 s, $80, 1024; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63}, {$72, $73, $74, $75}, d, p; add.u32 s, $80, 1536; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63}, {$76, $77, $78, $79}, d, p; wgmma.commit_group.sync.aligned; }')
ISSUE_256_H1 = tl.constexpr('{ .reg .pred p; .reg .b64 d; .reg .u32 s, h; mov.b32 h, 16; wgmma.fence.sync.aligned; add.u32 s, $80, 256; mov.b64 d, {s, h}; setp.ne.u32 p, 0, 0; wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63}, {$64, $65, $66, $67}, d, p; add.u32 s, $80, 768; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63}, {$68, $69, $70, $71}, d, p; add.u32 s, $80, 1280; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63}, {$72, $73, $74, $75}, d, p; add.u32 s, $80, 1792; mov.b64 d, {s, h}; setp.ne.u32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63}, {$76, $77, $78, $79}, d, p; wgmma.commit_group.sync.aligned; }')
ISSUE_C_256 = tl.constexpr('=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r')
WAIT_C_256 = tl.constexpr('=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r')
WAIT_256_0 = tl.constexpr('{ .shared .align 4 .b32 fp4_order[128]; .reg .u32 o, a; mov.u32 o, %tid.x; and.b32 o, o, 127; shl.b32 o, o, 2; mov.u32 a, fp4_order; add.u32 a, a, o; st.shared.b32 [a], $256; wgmma.wait_group.sync.aligned 0; mov.b32 $0, $128; mov.b32 $1, $129; mov.b32 $2, $130; mov.b32 $3, $131; mov.b32 $4, $132; mov.b32 $5, $133; mov.b32 $6, $134; mov.b32 $7, $135; mov.b32 $8, $136; mov.b32 $9, $137; mov.b32 $10, $138; mov.b32 $11, $139; mov.b32 $12, $140; mov.b32 $13, $141; mov.b32 $14, $142; mov.b32 $15, $143; mov.b32 $16, $144; mov.b32 $17, $145; mov.b32 $18, $146; mov.b32 $19, $147; mov.b32 $20, $148; mov.b32 $21, $149; mov.b32 $22, $150; mov.b32 $23, $151; mov.b32 $24, $152; mov.b32 $25, $153; mov.b32 $26, $154; mov.b32 $27, $155; mov.b32 $28, $156; mov.b32 $29, $157; mov.b32 $30, $158; mov.b32 $31, $159; mov.b32 $32, $160; mov.b32 $33, $161; mov.b32 $34, $162; mov.b32 $35, $163; mov.b32 $36, $164; mov.b32 $37, $165; mov.b32 $38, $166; mov.b32 $39, $167; mov.b32 $40, $168; mov.b32 $41, $169; mov.b32 $42, $170; mov.b32 $43, $171; mov.b32 $44, $172; mov.b32 $45, $173; mov.b32 $46, $174; mov.b32 $47, $175; mov.b32 $48, $176; mov.b32 $49, $177; mov.b32 $50, $178; mov.b32 $51, $179; mov.b32 $52, $180; mov.b32 $53, $181; mov.b32 $54, $182; mov.b32 $55, $183; mov.b32 $56, $184; mov.b32 $57, $185; mov.b32 $58, $186; mov.b32 $59, $187; mov.b32 $60, $188; mov.b32 $61, $189; mov.b32 $62, $190; mov.b32 $63, $191; mov.b32 $64, $192; mov.b32 $65, $193; mov.b32 $66, $194; mov.b32 $67, $195; mov.b32 $68, $196; mov.b32 $69, $197; mov.b32 $70, $198; mov.b32 $71, $199; mov.b32 $72, $200; mov.b32 $73, $201; mov.b32 $74, $202; mov.b32 $75, $203; mov.b32 $76, $204; mov.b32 $77, $205; mov.b32 $78, $206; mov.b32 $79, $207; mov.b32 $80, $208; mov.b32 $81, $209; mov.b32 $82, $210; mov.b32 $83, $211; mov.b32 $84, $212; mov.b32 $85, $213; mov.b32 $86, $214; mov.b32 $87, $215; mov.b32 $88, $216; mov.b32 $89, $217; mov.b32 $90, $218; mov.b32 $91, $219; mov.b32 $92, $220; mov.b32 $93, $221; mov.b32 $94, $222; mov.b32 $95, $223; mov.b32 $96, $224; mov.b32 $97, $225; mov.b32 $98, $226; mov.b32 $99, $227; mov.b32 $100, $228; mov.b32 $101, $229; mov.b32 $102, $230; mov.b32 $103, $231; mov.b32 $104, $232; mov.b32 $105, $233; mov.b32 $106, $234; mov.b32 $107, $235; mov.b32 $108, $236; mov.b32 $109, $237; mov.b32 $110, $238; mov.b32 $111, $239; mov.b32 $112, $240; mov.b32 $113, $241; mov.b32 $114, $242; mov.b32 $115, $243; mov.b32 $116, $244; mov.b32 $117, $245; mov.b32 $118, $246; mov.b32 $119, $247; mov.b32 $120, $248; mov.b32 $121, $249; mov.b32 $122, $250; mov.b32 $123, $251; mov.b32 $124, $252; mov.b32 $125, $253; mov.b32 $126, $254; mov.b32 $127, $255; }')
WAIT_256_1 = tl.constexpr('{ .shared .align 4 .b32 fp4_order[128]; .reg .u32 o, a; mov.u32 o, %tid.x; and.b32 o, o, 127; shl.b32 o, o, 2; mov.u32 a, fp4_order; add.u32 a, a, o; st.shared.b32 [a], $256; wgmma.wait_group.sync.aligned 1; mov.b32 $0, $128; mov.b32 $1, $129; mov.b32 $2, $130; mov.b32 $3, $131; mov.b32 $4, $132; mov.b32 $5, $133; mov.b32 $6, $134; mov.b32 $7, $135; mov.b32 $8, $136; mov.b32 $9, $137; mov.b32 $10, $138; mov.b32 $11, $139; mov.b32 $12, $140; mov.b32 $13, $141; mov.b32 $14, $142; mov.b32 $15, $143; mov.b32 $16, $144; mov.b32 $17, $145; mov.b32 $18, $146; mov.b32 $19, $147; mov.b32 $20, $148; mov.b32 $21, $149; mov.b32 $22, $150; mov.b32 $23, $151; mov.b32 $24, $152; mov.b32 $25, $153; mov.b32 $26, $154; mov.b32 $27, $155; mov.b32 $28, $156; mov.b32 $29, $157; mov.b32 $30, $158; mov.b32 $31, $159; mov.b32 $32, $160; mov.b32 $33, $161; mov.b32 $34, $162; mov.b32 $35, $163; mov.b32 $36, $164; mov.b32 $37, $165; mov.b32 $38, $166; mov.b32 $39, $167; mov.b32 $40, $168; mov.b32 $41, $169; mov.b32 $42, $170; mov.b32 $43, $171; mov.b32 $44, $172; mov.b32 $45, $173; mov.b32 $46, $174; mov.b32 $47, $175; mov.b32 $48, $176; mov.b32 $49, $177; mov.b32 $50, $178; mov.b32 $51, $179; mov.b32 $52, $180; mov.b32 $53, $181; mov.b32 $54, $182; mov.b32 $55, $183; mov.b32 $56, $184; mov.b32 $57, $185; mov.b32 $58, $186; mov.b32 $59, $187; mov.b32 $60, $188; mov.b32 $61, $189; mov.b32 $62, $190; mov.b32 $63, $191; mov.b32 $64, $192; mov.b32 $65, $193; mov.b32 $66, $194; mov.b32 $67, $195; mov.b32 $68, $196; mov.b32 $69, $197; mov.b32 $70, $198; mov.b32 $71, $199; mov.b32 $72, $200; mov.b32 $73, $201; mov.b32 $74, $202; mov.b32 $75, $203; mov.b32 $76, $204; mov.b32 $77, $205; mov.b32 $78, $206; mov.b32 $79, $207; mov.b32 $80, $208; mov.b32 $81, $209; mov.b32 $82, $210; mov.b32 $83, $211; mov.b32 $84, $212; mov.b32 $85, $213; mov.b32 $86, $214; mov.b32 $87, $215; mov.b32 $88, $216; mov.b32 $89, $217; mov.b32 $90, $218; mov.b32 $91, $219; mov.b32 $92, $220; mov.b32 $93, $221; mov.b32 $94, $222; mov.b32 $95, $223; mov.b32 $96, $224; mov.b32 $97, $225; mov.b32 $98, $226; mov.b32 $99, $227; mov.b32 $100, $228; mov.b32 $101, $229; mov.b32 $102, $230; mov.b32 $103, $231; mov.b32 $104, $232; mov.b32 $105, $233; mov.b32 $106, $234; mov.b32 $107, $235; mov.b32 $108, $236; mov.b32 $109, $237; mov.b32 $110, $238; mov.b32 $111, $239; mov.b32 $112, $240; mov.b32 $113, $241; mov.b32 $114, $242; mov.b32 $115, $243; mov.b32 $116, $244; mov.b32 $117, $245; mov.b32 $118, $246; mov.b32 $119, $247; mov.b32 $120, $248; mov.b32 $121, $249; mov.b32 $122, $250; mov.b32 $123, $251; mov.b32 $124, $252; mov.b32 $125, $253; mov.b32 $126, $254; mov.b32 $127, $255; }')
WAIT_256_2 = tl.constexpr('{ .shared .align 4 .b32 fp4_order[128]; .reg .u32 o, a; mov.u32 o, %tid.x; and.b32 o, o, 127; shl.b32 o, o, 2; mov.u32 a, fp4_order; add.u32 a, a, o; st.shared.b32 [a], $256; wgmma.wait_group.sync.aligned 2; mov.b32 $0, $128; mov.b32 $1, $129; mov.b32 $2, $130; mov.b32 $3, $131; mov.b32 $4, $132; mov.b32 $5, $133; mov.b32 $6, $134; mov.b32 $7, $135; mov.b32 $8, $136; mov.b32 $9, $137; mov.b32 $10, $138; mov.b32 $11, $139; mov.b32 $12, $140; mov.b32 $13, $141; mov.b32 $14, $142; mov.b32 $15, $143; mov.b32 $16, $144; mov.b32 $17, $145; mov.b32 $18, $146; mov.b32 $19, $147; mov.b32 $20, $148; mov.b32 $21, $149; mov.b32 $22, $150; mov.b32 $23, $151; mov.b32 $24, $152; mov.b32 $25, $153; mov.b32 $26, $154; mov.b32 $27, $155; mov.b32 $28, $156; mov.b32 $29, $157; mov.b32 $30, $158; mov.b32 $31, $159; mov.b32 $32, $160; mov.b32 $33, $161; mov.b32 $34, $162; mov.b32 $35, $163; mov.b32 $36, $164; mov.b32 $37, $165; mov.b32 $38, $166; mov.b32 $39, $167; mov.b32 $40, $168; mov.b32 $41, $169; mov.b32 $42, $170; mov.b32 $43, $171; mov.b32 $44, $172; mov.b32 $45, $173; mov.b32 $46, $174; mov.b32 $47, $175; mov.b32 $48, $176; mov.b32 $49, $177; mov.b32 $50, $178; mov.b32 $51, $179; mov.b32 $52, $180; mov.b32 $53, $181; mov.b32 $54, $182; mov.b32 $55, $183; mov.b32 $56, $184; mov.b32 $57, $185; mov.b32 $58, $186; mov.b32 $59, $187; mov.b32 $60, $188; mov.b32 $61, $189; mov.b32 $62, $190; mov.b32 $63, $191; mov.b32 $64, $192; mov.b32 $65, $193; mov.b32 $66, $194; mov.b32 $67, $195; mov.b32 $68, $196; mov.b32 $69, $197; mov.b32 $70, $198; mov.b32 $71, $199; mov.b32 $72, $200; mov.b32 $73, $201; mov.b32 $74, $202; mov.b32 $75, $203; mov.b32 $76, $204; mov.b32 $77, $205; mov.b32 $78, $206; mov.b32 $79, $207; mov.b32 $80, $208; mov.b32 $81, $209; mov.b32 $82, $210; mov.b32 $83, $211; mov.b32 $84, $212; mov.b32 $85, $213; mov.b32 $86, $214; mov.b32 $87, $215; mov.b32 $88, $216; mov.b32 $89, $217; mov.b32 $90, $218; mov.b32 $91, $219; mov.b32 $92, $220; mov.b32 $93, $221; mov.b32 $94, $222; mov.b32 $95, $223; mov.b32 $96, $224; mov.b32 $97, $225; mov.b32 $98, $226; mov.b32 $99, $227; mov.b32 $100, $228; mov.b32 $101, $229; mov.b32 $102, $230; mov.b32 $103, $231; mov.b32 $104, $232; mov.b32 $105, $233; mov.b32 $106, $234; mov.b32 $107, $235; mov.b32 $108, $236; mov.b32 $109, $237; mov.b32 $110, $238; mov.b32 $111, $239; mov.b32 $112, $240; mov.b32 $113, $241; mov.b32 $114, $242; mov.b32 $115, $243; mov.b32 $116, $244; mov.b32 $117, $245; mov.b32 $118, $246; mov.b32 $119, $247; mov.b32 $120, $248; mov.b32 $121, $249; mov.b32 $122, $250; mov.b32 $123, $251; mov.b32 $124, $252; mov.b32 $125, $253; mov.b32 $126, $254; mov.b32 $127, $255; }')


@triton.jit
def wgmma_rows2(fewest_in, out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride, weights_ptr,
                weights_stride, weights_head_stride, bt_row, block_table_page_stride, first_row, rows_here,
                row_ends, page_begin, page_end):
    ROWS: tl.constexpr = 2
    thread = tl.arange(0, 128)
    zero = tl.zeros([128], tl.int32)
    t = thread % 4
    odd = (t & 1) != 0
    second = (t & 2) != 0
    tok_lo = 16 * (thread // 32) + thread % 32 // 4
    tok_hi = tok_lo + 8
    scale_lo = 4096 + t * 64 + (tok_lo % 16) * 4 + tok_lo // 16
    scale_hi = 4096 + t * 64 + (tok_hi % 16) * 4 + tok_hi // 16
    fewest = zero + 3
    query_fold = zero + 3
    # The arrays are the program's for every request it scores: every thread past the last
    # request's tiles (whose epilogue reads the weights) before they are written again.
    queries = tl.inline_asm_elementwise(DECLARE_128, "=r,r", [thread], dtype=tl.int32, is_pure=True, pack=1)
    weights_at = tl.inline_asm_elementwise(DECLARE_W128, "=r,r", [thread], dtype=tl.int32, is_pure=True, pack=1)
    queries, weights_at = tl.inline_asm_elementwise(BARRIER, "=r,=r,r,r,r", [queries, weights_at, zero + first_row],
                                                    dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    words = q_payload_ptr.to(tl.pointer_type(tl.int32))
    stored = zero
    unit_0 = 0 * 128 + thread
    col_0 = unit_0 // 4
    head_0 = col_0 % 64
    ok_0 = col_0 // 64 < rows_here
    r64_0 = (first_row + tl.where(ok_0, col_0 // 64, 0)).to(tl.int64)
    at_0 = (words + (r64_0 * 64 + head_0) * 16 + t * 4).to(tl.int64)
    v0_0, v1_0, v2_0, v3_0 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [at_0], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    qexp_0 = tl.load(q_scales_ptr + r64_0 * 256 + t * 64 + (head_0 % 16) * 4 + head_0 // 16, mask=ok_0, other=127).to(tl.int32)
    weight_0 = tl.load(weights_ptr + r64_0 * weights_stride + head_0 * weights_head_stride, mask=ok_0 & (t == 0), other=0.0)
    unit_1 = 1 * 128 + thread
    col_1 = unit_1 // 4
    head_1 = col_1 % 64
    ok_1 = col_1 // 64 < rows_here
    r64_1 = (first_row + tl.where(ok_1, col_1 // 64, 0)).to(tl.int64)
    at_1 = (words + (r64_1 * 64 + head_1) * 16 + t * 4).to(tl.int64)
    v0_1, v1_1, v2_1, v3_1 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [at_1], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    qexp_1 = tl.load(q_scales_ptr + r64_1 * 256 + t * 64 + (head_1 % 16) * 4 + head_1 // 16, mask=ok_1, other=127).to(tl.int32)
    weight_1 = tl.load(weights_ptr + r64_1 * weights_stride + head_1 * weights_head_stride, mask=ok_1 & (t == 0), other=0.0)
    unit_2 = 2 * 128 + thread
    col_2 = unit_2 // 4
    head_2 = col_2 % 64
    ok_2 = col_2 // 64 < rows_here
    r64_2 = (first_row + tl.where(ok_2, col_2 // 64, 0)).to(tl.int64)
    at_2 = (words + (r64_2 * 64 + head_2) * 16 + t * 4).to(tl.int64)
    v0_2, v1_2, v2_2, v3_2 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [at_2], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    qexp_2 = tl.load(q_scales_ptr + r64_2 * 256 + t * 64 + (head_2 % 16) * 4 + head_2 // 16, mask=ok_2, other=127).to(tl.int32)
    weight_2 = tl.load(weights_ptr + r64_2 * weights_stride + head_2 * weights_head_stride, mask=ok_2 & (t == 0), other=0.0)
    unit_3 = 3 * 128 + thread
    col_3 = unit_3 // 4
    head_3 = col_3 % 64
    ok_3 = col_3 // 64 < rows_here
    r64_3 = (first_row + tl.where(ok_3, col_3 // 64, 0)).to(tl.int64)
    at_3 = (words + (r64_3 * 64 + head_3) * 16 + t * 4).to(tl.int64)
    v0_3, v1_3, v2_3, v3_3 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [at_3], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    qexp_3 = tl.load(q_scales_ptr + r64_3 * 256 + t * 64 + (head_3 % 16) * 4 + head_3 // 16, mask=ok_3, other=127).to(tl.int32)
    weight_3 = tl.load(weights_ptr + r64_3 * weights_stride + head_3 * weights_head_stride, mask=ok_3 & (t == 0), other=0.0)
    qmax = tl.inline_asm_elementwise(QMAX, '=r,r', [qexp_0], dtype=tl.int32, is_pure=True, pack=1)
    shift = 3 - (qmax - qexp_0)
    query_fold = tl.minimum(query_fold, shift)
    lo, hi = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [shift], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_0, v0_0, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 0 * 4096 + col_0 // 8 * 256 + col_0 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_0, v1_0, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 1 * 4096 + col_0 // 8 * 256 + col_0 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_0, v2_0, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 2 * 4096 + col_0 // 8 * 256 + col_0 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_0, v3_0, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 3 * 4096 + col_0 // 8 * 256 + col_0 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    folded = tl.where(ok_0, weight_0 * power_of_two(qmax, 0.0625), 0.0).to(tl.int32, bitcast=True)
    stored += tl.inline_asm_elementwise(STORE_IF, '=r,r,r,r', [weights_at + col_0 * 4, folded, (t == 0).to(tl.int32)], dtype=tl.int32, is_pure=True, pack=1)
    qmax = tl.inline_asm_elementwise(QMAX, '=r,r', [qexp_1], dtype=tl.int32, is_pure=True, pack=1)
    shift = 3 - (qmax - qexp_1)
    query_fold = tl.minimum(query_fold, shift)
    lo, hi = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [shift], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_1, v0_1, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 0 * 4096 + col_1 // 8 * 256 + col_1 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_1, v1_1, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 1 * 4096 + col_1 // 8 * 256 + col_1 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_1, v2_1, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 2 * 4096 + col_1 // 8 * 256 + col_1 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_1, v3_1, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 3 * 4096 + col_1 // 8 * 256 + col_1 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    folded = tl.where(ok_1, weight_1 * power_of_two(qmax, 0.0625), 0.0).to(tl.int32, bitcast=True)
    stored += tl.inline_asm_elementwise(STORE_IF, '=r,r,r,r', [weights_at + col_1 * 4, folded, (t == 0).to(tl.int32)], dtype=tl.int32, is_pure=True, pack=1)
    qmax = tl.inline_asm_elementwise(QMAX, '=r,r', [qexp_2], dtype=tl.int32, is_pure=True, pack=1)
    shift = 3 - (qmax - qexp_2)
    query_fold = tl.minimum(query_fold, shift)
    lo, hi = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [shift], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_2, v0_2, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 0 * 4096 + col_2 // 8 * 256 + col_2 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_2, v1_2, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 1 * 4096 + col_2 // 8 * 256 + col_2 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_2, v2_2, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 2 * 4096 + col_2 // 8 * 256 + col_2 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_2, v3_2, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 3 * 4096 + col_2 // 8 * 256 + col_2 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    folded = tl.where(ok_2, weight_2 * power_of_two(qmax, 0.0625), 0.0).to(tl.int32, bitcast=True)
    stored += tl.inline_asm_elementwise(STORE_IF, '=r,r,r,r', [weights_at + col_2 * 4, folded, (t == 0).to(tl.int32)], dtype=tl.int32, is_pure=True, pack=1)
    qmax = tl.inline_asm_elementwise(QMAX, '=r,r', [qexp_3], dtype=tl.int32, is_pure=True, pack=1)
    shift = 3 - (qmax - qexp_3)
    query_fold = tl.minimum(query_fold, shift)
    lo, hi = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [shift], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_3, v0_3, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 0 * 4096 + col_3 // 8 * 256 + col_3 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_3, v1_3, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 1 * 4096 + col_3 // 8 * 256 + col_3 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_3, v2_3, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 2 * 4096 + col_3 // 8 * 256 + col_3 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_3, v3_3, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 3 * 4096 + col_3 // 8 * 256 + col_3 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    folded = tl.where(ok_3, weight_3 * power_of_two(qmax, 0.0625), 0.0).to(tl.int32, bitcast=True)
    stored += tl.inline_asm_elementwise(STORE_IF, '=r,r,r,r', [weights_at + col_3 * 4, folded, (t == 0).to(tl.int32)], dtype=tl.int32, is_pure=True, pack=1)
    queries, weights_at = tl.inline_asm_elementwise(PUBLISH_BOTH, "=r,=r,r,r,r", [stored, queries, weights_at],
                                                    dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    query_descriptor = ((queries >> 4) & 0x3FFF) | 0x80000
    weights_at = weights_at + 8 * t
    limit0 = tl.where(0 < rows_here, tl.minimum(tl.sum(tl.where(tl.arange(0, ROWS) == 0, row_ends, 0), axis=0), page_end * 64), 0)
    limit1 = tl.where(1 < rows_here, tl.minimum(tl.sum(tl.where(tl.arange(0, ROWS) == 1, row_ends, 0), axis=0), page_end * 64), 0)
    out_row0 = (first_row + 0).to(tl.int64) * out_stride
    out_row1 = (first_row + 1).to(tl.int64) * out_stride
    last = page_end - 1
    base = cache_ptr + (tl.load(bt_row + tl.minimum(page_begin + 0, last) * block_table_page_stride).to(tl.uint32).to(tl.int64)) * page_stride
    q0x0, q0x1, q0x2, q0x3 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [base.to(tl.int64) + t * 1024 + tok_lo * 16], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    q0y0, q0y1, q0y2, q0y3 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [base.to(tl.int64) + t * 1024 + tok_hi * 16], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    q0el = tl.load(base + scale_lo).to(tl.int32)
    q0eh = tl.load(base + scale_hi).to(tl.int32)
    q0e = q0el | (q0eh << 16)
    base = cache_ptr + (tl.load(bt_row + tl.minimum(page_begin + 1, last) * block_table_page_stride).to(tl.uint32).to(tl.int64)) * page_stride
    q1x0, q1x1, q1x2, q1x3 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [base.to(tl.int64) + t * 1024 + tok_lo * 16], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    q1y0, q1y1, q1y2, q1y3 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [base.to(tl.int64) + t * 1024 + tok_hi * 16], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    q1el = tl.load(base + scale_lo).to(tl.int32)
    q1eh = tl.load(base + scale_hi).to(tl.int32)
    q1e = q1el | (q1eh << 16)
    k0 = tl.inline_asm_elementwise(KMAX, '=r,r', [q0e], dtype=tl.int32, is_pure=True, pack=1)
    s_lo = 3 - ((k0 & 0xFFFF) - (q0e & 0xFFFF))
    s_hi = 3 - ((k0 >> 16) - (q0e >> 16))
    fewest = tl.minimum(fewest, tl.minimum(s_lo, s_hi))
    lo_l, hi_l = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [s_lo], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    lo_h, hi_h = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [s_hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_0, a0_2 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0x0, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_1, a0_3 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0y0, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_4, a0_6 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0x1, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_5, a0_7 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0y1, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_8, a0_10 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0x2, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_9, a0_11 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0y2, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_12, a0_14 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0x3, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_13, a0_15 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0y3, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    page0 = tl.load(bt_row + tl.minimum(page_begin + 2, last) * block_table_page_stride).to(tl.uint32).to(tl.int64)
    for T in range(page_begin, page_end):
        base = cache_ptr + (page0) * page_stride
        q2x0, q2x1, q2x2, q2x3 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [base.to(tl.int64) + t * 1024 + tok_lo * 16], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
        q2y0, q2y1, q2y2, q2y3 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [base.to(tl.int64) + t * 1024 + tok_hi * 16], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
        q2el = tl.load(base + scale_lo).to(tl.int32)
        q2eh = tl.load(base + scale_hi).to(tl.int32)
        page0 = tl.load(bt_row + tl.minimum(T + 3, last) * block_table_page_stride).to(tl.uint32).to(tl.int64)
        d0_0, d0_1, d0_2, d0_3, d0_4, d0_5, d0_6, d0_7, d0_8, d0_9, d0_10, d0_11, d0_12, d0_13, d0_14, d0_15, d0_16, d0_17, d0_18, d0_19, d0_20, d0_21, d0_22, d0_23, d0_24, d0_25, d0_26, d0_27, d0_28, d0_29, d0_30, d0_31 = tl.inline_asm_elementwise(ISSUE_128_H0, ISSUE_C_64, [a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15, query_descriptor], dtype=(tl.int32,) * 32, is_pure=True, pack=1)
        d0_0, d0_1, d0_2, d0_3, d0_4, d0_5, d0_6, d0_7, d0_8, d0_9, d0_10, d0_11, d0_12, d0_13, d0_14, d0_15, d0_16, d0_17, d0_18, d0_19, d0_20, d0_21, d0_22, d0_23, d0_24, d0_25, d0_26, d0_27, d0_28, d0_29, d0_30, d0_31 = tl.inline_asm_elementwise(WAIT_64_0, WAIT_C_64, [d0_0, d0_1, d0_2, d0_3, d0_4, d0_5, d0_6, d0_7, d0_8, d0_9, d0_10, d0_11, d0_12, d0_13, d0_14, d0_15, d0_16, d0_17, d0_18, d0_19, d0_20, d0_21, d0_22, d0_23, d0_24, d0_25, d0_26, d0_27, d0_28, d0_29, d0_30, d0_31, zero], dtype=(tl.int32,) * 32, is_pure=True, pack=1)
        at_w = weights_at + (k0 >> 24)
        w0, w1 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 0], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w2, w3 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 32], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w4, w5 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 64], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w6, w7 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 96], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w8, w9 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 128], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w10, w11 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 160], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w12, w13 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 192], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w14, w15 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 224], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        u0 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_0], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u1 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_1], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u2 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_2], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u3 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_3], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u4 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_4], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u5 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_5], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u6 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_6], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u7 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_7], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u8 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_8], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u9 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_9], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u10 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_10], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u11 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_11], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u12 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_12], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u13 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_13], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u14 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_14], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u15 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_15], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u16 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_16], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u17 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_17], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u18 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_18], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u19 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_19], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u20 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_20], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u21 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_21], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u22 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_22], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u23 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_23], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u24 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_24], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u25 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_25], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u26 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_26], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u27 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_27], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u28 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_28], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u29 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_29], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u30 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_30], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u31 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_31], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        c0 = u0 * w0
        c0 = tl.fma(u4, w2, c0)
        c0 = tl.fma(u8, w4, c0)
        c0 = tl.fma(u12, w6, c0)
        c0 = tl.fma(u16, w8, c0)
        c0 = tl.fma(u20, w10, c0)
        c0 = tl.fma(u24, w12, c0)
        c0 = tl.fma(u28, w14, c0)
        c1 = u1 * w1
        c1 = tl.fma(u5, w3, c1)
        c1 = tl.fma(u9, w5, c1)
        c1 = tl.fma(u13, w7, c1)
        c1 = tl.fma(u17, w9, c1)
        c1 = tl.fma(u21, w11, c1)
        c1 = tl.fma(u25, w13, c1)
        c1 = tl.fma(u29, w15, c1)
        v00 = c0 + c1
        c0 = u2 * w0
        c0 = tl.fma(u6, w2, c0)
        c0 = tl.fma(u10, w4, c0)
        c0 = tl.fma(u14, w6, c0)
        c0 = tl.fma(u18, w8, c0)
        c0 = tl.fma(u22, w10, c0)
        c0 = tl.fma(u26, w12, c0)
        c0 = tl.fma(u30, w14, c0)
        c1 = u3 * w1
        c1 = tl.fma(u7, w3, c1)
        c1 = tl.fma(u11, w5, c1)
        c1 = tl.fma(u15, w7, c1)
        c1 = tl.fma(u19, w9, c1)
        c1 = tl.fma(u23, w11, c1)
        c1 = tl.fma(u27, w13, c1)
        c1 = tl.fma(u31, w15, c1)
        v10 = c0 + c1
        kmax = tl.where(odd, k0 >> 16, k0 & 0xFFFF)
        scale = tl.where(kmax == 255, float('nan'), (kmax << 23).to(tl.float32, bitcast=True) * 0.0625)
        j = (T) * 64 + tl.where(odd, tok_hi, tok_lo)
        x = tl.where(odd, v10, v00) + tl.inline_asm_elementwise(SHFL1, '=f,f', [tl.where(odd, v00, v10)], dtype=tl.float32, is_pure=True, pack=1)
        x = x + tl.inline_asm_elementwise(SHFL2, '=f,f', [x], dtype=tl.float32, is_pure=True, pack=1)
        tl.store(out_ptr + out_row0 + j, x * 4194304.0 * scale, mask=(t < 2) & (j < limit0))
        done = x.to(tl.int32, bitcast=True)
        d0_0, d0_1, d0_2, d0_3, d0_4, d0_5, d0_6, d0_7, d0_8, d0_9, d0_10, d0_11, d0_12, d0_13, d0_14, d0_15, d0_16, d0_17, d0_18, d0_19, d0_20, d0_21, d0_22, d0_23, d0_24, d0_25, d0_26, d0_27, d0_28, d0_29, d0_30, d0_31 = tl.inline_asm_elementwise(ISSUE_128_H1, ISSUE_C_64, [a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15, query_descriptor], dtype=(tl.int32,) * 32, is_pure=True, pack=1)
        d0_0, d0_1, d0_2, d0_3, d0_4, d0_5, d0_6, d0_7, d0_8, d0_9, d0_10, d0_11, d0_12, d0_13, d0_14, d0_15, d0_16, d0_17, d0_18, d0_19, d0_20, d0_21, d0_22, d0_23, d0_24, d0_25, d0_26, d0_27, d0_28, d0_29, d0_30, d0_31 = tl.inline_asm_elementwise(WAIT_64_0, WAIT_C_64, [d0_0, d0_1, d0_2, d0_3, d0_4, d0_5, d0_6, d0_7, d0_8, d0_9, d0_10, d0_11, d0_12, d0_13, d0_14, d0_15, d0_16, d0_17, d0_18, d0_19, d0_20, d0_21, d0_22, d0_23, d0_24, d0_25, d0_26, d0_27, d0_28, d0_29, d0_30, d0_31, done], dtype=(tl.int32,) * 32, is_pure=True, pack=1)
        at_w = weights_at + (k0 >> 24)
        w16, w17 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 256], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w18, w19 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 288], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w20, w21 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 320], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w22, w23 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 352], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w24, w25 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 384], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w26, w27 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 416], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w28, w29 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 448], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w30, w31 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 480], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        u0 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_0], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u1 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_1], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u2 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_2], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u3 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_3], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u4 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_4], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u5 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_5], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u6 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_6], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u7 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_7], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u8 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_8], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u9 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_9], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u10 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_10], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u11 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_11], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u12 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_12], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u13 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_13], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u14 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_14], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u15 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_15], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u16 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_16], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u17 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_17], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u18 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_18], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u19 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_19], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u20 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_20], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u21 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_21], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u22 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_22], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u23 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_23], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u24 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_24], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u25 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_25], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u26 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_26], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u27 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_27], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u28 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_28], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u29 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_29], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u30 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_30], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u31 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_31], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        c0 = u0 * w16
        c0 = tl.fma(u4, w18, c0)
        c0 = tl.fma(u8, w20, c0)
        c0 = tl.fma(u12, w22, c0)
        c0 = tl.fma(u16, w24, c0)
        c0 = tl.fma(u20, w26, c0)
        c0 = tl.fma(u24, w28, c0)
        c0 = tl.fma(u28, w30, c0)
        c1 = u1 * w17
        c1 = tl.fma(u5, w19, c1)
        c1 = tl.fma(u9, w21, c1)
        c1 = tl.fma(u13, w23, c1)
        c1 = tl.fma(u17, w25, c1)
        c1 = tl.fma(u21, w27, c1)
        c1 = tl.fma(u25, w29, c1)
        c1 = tl.fma(u29, w31, c1)
        v00 = c0 + c1
        c0 = u2 * w16
        c0 = tl.fma(u6, w18, c0)
        c0 = tl.fma(u10, w20, c0)
        c0 = tl.fma(u14, w22, c0)
        c0 = tl.fma(u18, w24, c0)
        c0 = tl.fma(u22, w26, c0)
        c0 = tl.fma(u26, w28, c0)
        c0 = tl.fma(u30, w30, c0)
        c1 = u3 * w17
        c1 = tl.fma(u7, w19, c1)
        c1 = tl.fma(u11, w21, c1)
        c1 = tl.fma(u15, w23, c1)
        c1 = tl.fma(u19, w25, c1)
        c1 = tl.fma(u23, w27, c1)
        c1 = tl.fma(u27, w29, c1)
        c1 = tl.fma(u31, w31, c1)
        v10 = c0 + c1
        kmax = tl.where(odd, k0 >> 16, k0 & 0xFFFF)
        scale = tl.where(kmax == 255, float('nan'), (kmax << 23).to(tl.float32, bitcast=True) * 0.0625)
        j = (T) * 64 + tl.where(odd, tok_hi, tok_lo)
        x = tl.where(odd, v10, v00) + tl.inline_asm_elementwise(SHFL1, '=f,f', [tl.where(odd, v00, v10)], dtype=tl.float32, is_pure=True, pack=1)
        x = x + tl.inline_asm_elementwise(SHFL2, '=f,f', [x], dtype=tl.float32, is_pure=True, pack=1)
        tl.store(out_ptr + out_row1 + j, x * 4194304.0 * scale, mask=(t < 2) & (j < limit1))
        done = x.to(tl.int32, bitcast=True)
        k0 = tl.inline_asm_elementwise(KMAX, '=r,r', [q1e], dtype=tl.int32, is_pure=True, pack=1)
        s_lo = 3 - ((k0 & 0xFFFF) - (q1e & 0xFFFF))
        s_hi = 3 - ((k0 >> 16) - (q1e >> 16))
        fewest = tl.minimum(fewest, tl.minimum(s_lo, s_hi))
        lo_l, hi_l = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [s_lo], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        lo_h, hi_h = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [s_hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_0, a0_2 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1x0, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_1, a0_3 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1y0, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_4, a0_6 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1x1, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_5, a0_7 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1y1, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_8, a0_10 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1x2, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_9, a0_11 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1y2, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_12, a0_14 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1x3, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_13, a0_15 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1y3, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        q1x0, q1x1, q1x2, q1x3 = q2x0, q2x1, q2x2, q2x3
        q1y0, q1y1, q1y2, q1y3 = q2y0, q2y1, q2y2, q2y3
        q1e = q2el | (q2eh << 16)
    keys = tl.min(fewest, axis=0)
    return tl.minimum(fewest_in, tl.where(tl.min(query_fold, axis=0) < 0, -1, keys))


@triton.jit
def wgmma_rows4(fewest_in, out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride, weights_ptr,
                weights_stride, weights_head_stride, bt_row, block_table_page_stride, first_row, rows_here,
                row_ends, page_begin, page_end):
    ROWS: tl.constexpr = 4
    thread = tl.arange(0, 128)
    zero = tl.zeros([128], tl.int32)
    t = thread % 4
    odd = (t & 1) != 0
    second = (t & 2) != 0
    tok_lo = 16 * (thread // 32) + thread % 32 // 4
    tok_hi = tok_lo + 8
    scale_lo = 4096 + t * 64 + (tok_lo % 16) * 4 + tok_lo // 16
    scale_hi = 4096 + t * 64 + (tok_hi % 16) * 4 + tok_hi // 16
    fewest = zero + 3
    query_fold = zero + 3
    # The arrays are the program's for every request it scores: every thread past the last
    # request's tiles (whose epilogue reads the weights) before they are written again.
    queries = tl.inline_asm_elementwise(DECLARE_256, "=r,r", [thread], dtype=tl.int32, is_pure=True, pack=1)
    weights_at = tl.inline_asm_elementwise(DECLARE_W256, "=r,r", [thread], dtype=tl.int32, is_pure=True, pack=1)
    queries, weights_at = tl.inline_asm_elementwise(BARRIER, "=r,=r,r,r,r", [queries, weights_at, zero + first_row],
                                                    dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    words = q_payload_ptr.to(tl.pointer_type(tl.int32))
    stored = zero
    unit_0 = 0 * 128 + thread
    col_0 = unit_0 // 4
    head_0 = col_0 % 64
    ok_0 = col_0 // 64 < rows_here
    r64_0 = (first_row + tl.where(ok_0, col_0 // 64, 0)).to(tl.int64)
    at_0 = (words + (r64_0 * 64 + head_0) * 16 + t * 4).to(tl.int64)
    v0_0, v1_0, v2_0, v3_0 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [at_0], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    qexp_0 = tl.load(q_scales_ptr + r64_0 * 256 + t * 64 + (head_0 % 16) * 4 + head_0 // 16, mask=ok_0, other=127).to(tl.int32)
    weight_0 = tl.load(weights_ptr + r64_0 * weights_stride + head_0 * weights_head_stride, mask=ok_0 & (t == 0), other=0.0)
    unit_1 = 1 * 128 + thread
    col_1 = unit_1 // 4
    head_1 = col_1 % 64
    ok_1 = col_1 // 64 < rows_here
    r64_1 = (first_row + tl.where(ok_1, col_1 // 64, 0)).to(tl.int64)
    at_1 = (words + (r64_1 * 64 + head_1) * 16 + t * 4).to(tl.int64)
    v0_1, v1_1, v2_1, v3_1 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [at_1], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    qexp_1 = tl.load(q_scales_ptr + r64_1 * 256 + t * 64 + (head_1 % 16) * 4 + head_1 // 16, mask=ok_1, other=127).to(tl.int32)
    weight_1 = tl.load(weights_ptr + r64_1 * weights_stride + head_1 * weights_head_stride, mask=ok_1 & (t == 0), other=0.0)
    unit_2 = 2 * 128 + thread
    col_2 = unit_2 // 4
    head_2 = col_2 % 64
    ok_2 = col_2 // 64 < rows_here
    r64_2 = (first_row + tl.where(ok_2, col_2 // 64, 0)).to(tl.int64)
    at_2 = (words + (r64_2 * 64 + head_2) * 16 + t * 4).to(tl.int64)
    v0_2, v1_2, v2_2, v3_2 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [at_2], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    qexp_2 = tl.load(q_scales_ptr + r64_2 * 256 + t * 64 + (head_2 % 16) * 4 + head_2 // 16, mask=ok_2, other=127).to(tl.int32)
    weight_2 = tl.load(weights_ptr + r64_2 * weights_stride + head_2 * weights_head_stride, mask=ok_2 & (t == 0), other=0.0)
    unit_3 = 3 * 128 + thread
    col_3 = unit_3 // 4
    head_3 = col_3 % 64
    ok_3 = col_3 // 64 < rows_here
    r64_3 = (first_row + tl.where(ok_3, col_3 // 64, 0)).to(tl.int64)
    at_3 = (words + (r64_3 * 64 + head_3) * 16 + t * 4).to(tl.int64)
    v0_3, v1_3, v2_3, v3_3 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [at_3], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    qexp_3 = tl.load(q_scales_ptr + r64_3 * 256 + t * 64 + (head_3 % 16) * 4 + head_3 // 16, mask=ok_3, other=127).to(tl.int32)
    weight_3 = tl.load(weights_ptr + r64_3 * weights_stride + head_3 * weights_head_stride, mask=ok_3 & (t == 0), other=0.0)
    unit_4 = 4 * 128 + thread
    col_4 = unit_4 // 4
    head_4 = col_4 % 64
    ok_4 = col_4 // 64 < rows_here
    r64_4 = (first_row + tl.where(ok_4, col_4 // 64, 0)).to(tl.int64)
    at_4 = (words + (r64_4 * 64 + head_4) * 16 + t * 4).to(tl.int64)
    v0_4, v1_4, v2_4, v3_4 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [at_4], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    qexp_4 = tl.load(q_scales_ptr + r64_4 * 256 + t * 64 + (head_4 % 16) * 4 + head_4 // 16, mask=ok_4, other=127).to(tl.int32)
    weight_4 = tl.load(weights_ptr + r64_4 * weights_stride + head_4 * weights_head_stride, mask=ok_4 & (t == 0), other=0.0)
    unit_5 = 5 * 128 + thread
    col_5 = unit_5 // 4
    head_5 = col_5 % 64
    ok_5 = col_5 // 64 < rows_here
    r64_5 = (first_row + tl.where(ok_5, col_5 // 64, 0)).to(tl.int64)
    at_5 = (words + (r64_5 * 64 + head_5) * 16 + t * 4).to(tl.int64)
    v0_5, v1_5, v2_5, v3_5 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [at_5], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    qexp_5 = tl.load(q_scales_ptr + r64_5 * 256 + t * 64 + (head_5 % 16) * 4 + head_5 // 16, mask=ok_5, other=127).to(tl.int32)
    weight_5 = tl.load(weights_ptr + r64_5 * weights_stride + head_5 * weights_head_stride, mask=ok_5 & (t == 0), other=0.0)
    unit_6 = 6 * 128 + thread
    col_6 = unit_6 // 4
    head_6 = col_6 % 64
    ok_6 = col_6 // 64 < rows_here
    r64_6 = (first_row + tl.where(ok_6, col_6 // 64, 0)).to(tl.int64)
    at_6 = (words + (r64_6 * 64 + head_6) * 16 + t * 4).to(tl.int64)
    v0_6, v1_6, v2_6, v3_6 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [at_6], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    qexp_6 = tl.load(q_scales_ptr + r64_6 * 256 + t * 64 + (head_6 % 16) * 4 + head_6 // 16, mask=ok_6, other=127).to(tl.int32)
    weight_6 = tl.load(weights_ptr + r64_6 * weights_stride + head_6 * weights_head_stride, mask=ok_6 & (t == 0), other=0.0)
    unit_7 = 7 * 128 + thread
    col_7 = unit_7 // 4
    head_7 = col_7 % 64
    ok_7 = col_7 // 64 < rows_here
    r64_7 = (first_row + tl.where(ok_7, col_7 // 64, 0)).to(tl.int64)
    at_7 = (words + (r64_7 * 64 + head_7) * 16 + t * 4).to(tl.int64)
    v0_7, v1_7, v2_7, v3_7 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [at_7], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    qexp_7 = tl.load(q_scales_ptr + r64_7 * 256 + t * 64 + (head_7 % 16) * 4 + head_7 // 16, mask=ok_7, other=127).to(tl.int32)
    weight_7 = tl.load(weights_ptr + r64_7 * weights_stride + head_7 * weights_head_stride, mask=ok_7 & (t == 0), other=0.0)
    qmax = tl.inline_asm_elementwise(QMAX, '=r,r', [qexp_0], dtype=tl.int32, is_pure=True, pack=1)
    shift = 3 - (qmax - qexp_0)
    query_fold = tl.minimum(query_fold, shift)
    lo, hi = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [shift], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_0, v0_0, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 0 * 8192 + col_0 // 8 * 256 + col_0 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_0, v1_0, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 1 * 8192 + col_0 // 8 * 256 + col_0 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_0, v2_0, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 2 * 8192 + col_0 // 8 * 256 + col_0 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_0, v3_0, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 3 * 8192 + col_0 // 8 * 256 + col_0 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    folded = tl.where(ok_0, weight_0 * power_of_two(qmax, 0.0625), 0.0).to(tl.int32, bitcast=True)
    stored += tl.inline_asm_elementwise(STORE_IF, '=r,r,r,r', [weights_at + col_0 * 4, folded, (t == 0).to(tl.int32)], dtype=tl.int32, is_pure=True, pack=1)
    qmax = tl.inline_asm_elementwise(QMAX, '=r,r', [qexp_1], dtype=tl.int32, is_pure=True, pack=1)
    shift = 3 - (qmax - qexp_1)
    query_fold = tl.minimum(query_fold, shift)
    lo, hi = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [shift], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_1, v0_1, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 0 * 8192 + col_1 // 8 * 256 + col_1 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_1, v1_1, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 1 * 8192 + col_1 // 8 * 256 + col_1 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_1, v2_1, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 2 * 8192 + col_1 // 8 * 256 + col_1 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_1, v3_1, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 3 * 8192 + col_1 // 8 * 256 + col_1 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    folded = tl.where(ok_1, weight_1 * power_of_two(qmax, 0.0625), 0.0).to(tl.int32, bitcast=True)
    stored += tl.inline_asm_elementwise(STORE_IF, '=r,r,r,r', [weights_at + col_1 * 4, folded, (t == 0).to(tl.int32)], dtype=tl.int32, is_pure=True, pack=1)
    qmax = tl.inline_asm_elementwise(QMAX, '=r,r', [qexp_2], dtype=tl.int32, is_pure=True, pack=1)
    shift = 3 - (qmax - qexp_2)
    query_fold = tl.minimum(query_fold, shift)
    lo, hi = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [shift], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_2, v0_2, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 0 * 8192 + col_2 // 8 * 256 + col_2 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_2, v1_2, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 1 * 8192 + col_2 // 8 * 256 + col_2 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_2, v2_2, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 2 * 8192 + col_2 // 8 * 256 + col_2 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_2, v3_2, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 3 * 8192 + col_2 // 8 * 256 + col_2 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    folded = tl.where(ok_2, weight_2 * power_of_two(qmax, 0.0625), 0.0).to(tl.int32, bitcast=True)
    stored += tl.inline_asm_elementwise(STORE_IF, '=r,r,r,r', [weights_at + col_2 * 4, folded, (t == 0).to(tl.int32)], dtype=tl.int32, is_pure=True, pack=1)
    qmax = tl.inline_asm_elementwise(QMAX, '=r,r', [qexp_3], dtype=tl.int32, is_pure=True, pack=1)
    shift = 3 - (qmax - qexp_3)
    query_fold = tl.minimum(query_fold, shift)
    lo, hi = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [shift], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_3, v0_3, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 0 * 8192 + col_3 // 8 * 256 + col_3 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_3, v1_3, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 1 * 8192 + col_3 // 8 * 256 + col_3 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_3, v2_3, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 2 * 8192 + col_3 // 8 * 256 + col_3 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_3, v3_3, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 3 * 8192 + col_3 // 8 * 256 + col_3 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    folded = tl.where(ok_3, weight_3 * power_of_two(qmax, 0.0625), 0.0).to(tl.int32, bitcast=True)
    stored += tl.inline_asm_elementwise(STORE_IF, '=r,r,r,r', [weights_at + col_3 * 4, folded, (t == 0).to(tl.int32)], dtype=tl.int32, is_pure=True, pack=1)
    qmax = tl.inline_asm_elementwise(QMAX, '=r,r', [qexp_4], dtype=tl.int32, is_pure=True, pack=1)
    shift = 3 - (qmax - qexp_4)
    query_fold = tl.minimum(query_fold, shift)
    lo, hi = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [shift], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_4, v0_4, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 0 * 8192 + col_4 // 8 * 256 + col_4 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_4, v1_4, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 1 * 8192 + col_4 // 8 * 256 + col_4 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_4, v2_4, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 2 * 8192 + col_4 // 8 * 256 + col_4 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_4, v3_4, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 3 * 8192 + col_4 // 8 * 256 + col_4 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    folded = tl.where(ok_4, weight_4 * power_of_two(qmax, 0.0625), 0.0).to(tl.int32, bitcast=True)
    stored += tl.inline_asm_elementwise(STORE_IF, '=r,r,r,r', [weights_at + col_4 * 4, folded, (t == 0).to(tl.int32)], dtype=tl.int32, is_pure=True, pack=1)
    qmax = tl.inline_asm_elementwise(QMAX, '=r,r', [qexp_5], dtype=tl.int32, is_pure=True, pack=1)
    shift = 3 - (qmax - qexp_5)
    query_fold = tl.minimum(query_fold, shift)
    lo, hi = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [shift], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_5, v0_5, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 0 * 8192 + col_5 // 8 * 256 + col_5 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_5, v1_5, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 1 * 8192 + col_5 // 8 * 256 + col_5 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_5, v2_5, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 2 * 8192 + col_5 // 8 * 256 + col_5 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_5, v3_5, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 3 * 8192 + col_5 // 8 * 256 + col_5 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    folded = tl.where(ok_5, weight_5 * power_of_two(qmax, 0.0625), 0.0).to(tl.int32, bitcast=True)
    stored += tl.inline_asm_elementwise(STORE_IF, '=r,r,r,r', [weights_at + col_5 * 4, folded, (t == 0).to(tl.int32)], dtype=tl.int32, is_pure=True, pack=1)
    qmax = tl.inline_asm_elementwise(QMAX, '=r,r', [qexp_6], dtype=tl.int32, is_pure=True, pack=1)
    shift = 3 - (qmax - qexp_6)
    query_fold = tl.minimum(query_fold, shift)
    lo, hi = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [shift], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_6, v0_6, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 0 * 8192 + col_6 // 8 * 256 + col_6 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_6, v1_6, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 1 * 8192 + col_6 // 8 * 256 + col_6 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_6, v2_6, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 2 * 8192 + col_6 // 8 * 256 + col_6 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_6, v3_6, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 3 * 8192 + col_6 // 8 * 256 + col_6 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    folded = tl.where(ok_6, weight_6 * power_of_two(qmax, 0.0625), 0.0).to(tl.int32, bitcast=True)
    stored += tl.inline_asm_elementwise(STORE_IF, '=r,r,r,r', [weights_at + col_6 * 4, folded, (t == 0).to(tl.int32)], dtype=tl.int32, is_pure=True, pack=1)
    qmax = tl.inline_asm_elementwise(QMAX, '=r,r', [qexp_7], dtype=tl.int32, is_pure=True, pack=1)
    shift = 3 - (qmax - qexp_7)
    query_fold = tl.minimum(query_fold, shift)
    lo, hi = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [shift], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_7, v0_7, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 0 * 8192 + col_7 // 8 * 256 + col_7 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_7, v1_7, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 1 * 8192 + col_7 // 8 * 256 + col_7 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_7, v2_7, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 2 * 8192 + col_7 // 8 * 256 + col_7 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok_7, v3_7, 0), lo, hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    q_at = queries + 3 * 8192 + col_7 // 8 * 256 + col_7 % 8 * 16 + t * 4
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)
    stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, pack=1)
    folded = tl.where(ok_7, weight_7 * power_of_two(qmax, 0.0625), 0.0).to(tl.int32, bitcast=True)
    stored += tl.inline_asm_elementwise(STORE_IF, '=r,r,r,r', [weights_at + col_7 * 4, folded, (t == 0).to(tl.int32)], dtype=tl.int32, is_pure=True, pack=1)
    queries, weights_at = tl.inline_asm_elementwise(PUBLISH_BOTH, "=r,=r,r,r,r", [stored, queries, weights_at],
                                                    dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    query_descriptor = ((queries >> 4) & 0x3FFF) | 0x80000
    weights_at = weights_at + 8 * t
    limit0 = tl.where(0 < rows_here, tl.minimum(tl.sum(tl.where(tl.arange(0, ROWS) == 0, row_ends, 0), axis=0), page_end * 64), 0)
    limit1 = tl.where(1 < rows_here, tl.minimum(tl.sum(tl.where(tl.arange(0, ROWS) == 1, row_ends, 0), axis=0), page_end * 64), 0)
    limit2 = tl.where(2 < rows_here, tl.minimum(tl.sum(tl.where(tl.arange(0, ROWS) == 2, row_ends, 0), axis=0), page_end * 64), 0)
    limit3 = tl.where(3 < rows_here, tl.minimum(tl.sum(tl.where(tl.arange(0, ROWS) == 3, row_ends, 0), axis=0), page_end * 64), 0)
    out_row0 = (first_row + 0).to(tl.int64) * out_stride
    out_row1 = (first_row + 1).to(tl.int64) * out_stride
    out_row2 = (first_row + 2).to(tl.int64) * out_stride
    out_row3 = (first_row + 3).to(tl.int64) * out_stride
    last = page_end - 1
    base = cache_ptr + (tl.load(bt_row + tl.minimum(page_begin + 0, last) * block_table_page_stride).to(tl.uint32).to(tl.int64)) * page_stride
    q0x0, q0x1, q0x2, q0x3 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [base.to(tl.int64) + t * 1024 + tok_lo * 16], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    q0y0, q0y1, q0y2, q0y3 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [base.to(tl.int64) + t * 1024 + tok_hi * 16], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    q0el = tl.load(base + scale_lo).to(tl.int32)
    q0eh = tl.load(base + scale_hi).to(tl.int32)
    q0e = q0el | (q0eh << 16)
    base = cache_ptr + (tl.load(bt_row + tl.minimum(page_begin + 1, last) * block_table_page_stride).to(tl.uint32).to(tl.int64)) * page_stride
    q1x0, q1x1, q1x2, q1x3 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [base.to(tl.int64) + t * 1024 + tok_lo * 16], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    q1y0, q1y1, q1y2, q1y3 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [base.to(tl.int64) + t * 1024 + tok_hi * 16], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
    q1el = tl.load(base + scale_lo).to(tl.int32)
    q1eh = tl.load(base + scale_hi).to(tl.int32)
    q1e = q1el | (q1eh << 16)
    k0 = tl.inline_asm_elementwise(KMAX, '=r,r', [q0e], dtype=tl.int32, is_pure=True, pack=1)
    s_lo = 3 - ((k0 & 0xFFFF) - (q0e & 0xFFFF))
    s_hi = 3 - ((k0 >> 16) - (q0e >> 16))
    fewest = tl.minimum(fewest, tl.minimum(s_lo, s_hi))
    lo_l, hi_l = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [s_lo], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    lo_h, hi_h = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [s_hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_0, a0_2 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0x0, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_1, a0_3 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0y0, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_4, a0_6 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0x1, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_5, a0_7 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0y1, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_8, a0_10 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0x2, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_9, a0_11 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0y2, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_12, a0_14 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0x3, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    a0_13, a0_15 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q0y3, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    page0 = tl.load(bt_row + tl.minimum(page_begin + 2, last) * block_table_page_stride).to(tl.uint32).to(tl.int64)
    for T in range(page_begin, page_end):
        base = cache_ptr + (page0) * page_stride
        q2x0, q2x1, q2x2, q2x3 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [base.to(tl.int64) + t * 1024 + tok_lo * 16], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
        q2y0, q2y1, q2y2, q2y3 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [base.to(tl.int64) + t * 1024 + tok_hi * 16], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
        q2el = tl.load(base + scale_lo).to(tl.int32)
        q2eh = tl.load(base + scale_hi).to(tl.int32)
        page0 = tl.load(bt_row + tl.minimum(T + 3, last) * block_table_page_stride).to(tl.uint32).to(tl.int64)
        d0_0, d0_1, d0_2, d0_3, d0_4, d0_5, d0_6, d0_7, d0_8, d0_9, d0_10, d0_11, d0_12, d0_13, d0_14, d0_15, d0_16, d0_17, d0_18, d0_19, d0_20, d0_21, d0_22, d0_23, d0_24, d0_25, d0_26, d0_27, d0_28, d0_29, d0_30, d0_31, d0_32, d0_33, d0_34, d0_35, d0_36, d0_37, d0_38, d0_39, d0_40, d0_41, d0_42, d0_43, d0_44, d0_45, d0_46, d0_47, d0_48, d0_49, d0_50, d0_51, d0_52, d0_53, d0_54, d0_55, d0_56, d0_57, d0_58, d0_59, d0_60, d0_61, d0_62, d0_63 = tl.inline_asm_elementwise(ISSUE_256_H0, ISSUE_C_128, [a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15, query_descriptor], dtype=(tl.int32,) * 64, is_pure=True, pack=1)
        d0_0, d0_1, d0_2, d0_3, d0_4, d0_5, d0_6, d0_7, d0_8, d0_9, d0_10, d0_11, d0_12, d0_13, d0_14, d0_15, d0_16, d0_17, d0_18, d0_19, d0_20, d0_21, d0_22, d0_23, d0_24, d0_25, d0_26, d0_27, d0_28, d0_29, d0_30, d0_31, d0_32, d0_33, d0_34, d0_35, d0_36, d0_37, d0_38, d0_39, d0_40, d0_41, d0_42, d0_43, d0_44, d0_45, d0_46, d0_47, d0_48, d0_49, d0_50, d0_51, d0_52, d0_53, d0_54, d0_55, d0_56, d0_57, d0_58, d0_59, d0_60, d0_61, d0_62, d0_63 = tl.inline_asm_elementwise(WAIT_128_0, WAIT_C_128, [d0_0, d0_1, d0_2, d0_3, d0_4, d0_5, d0_6, d0_7, d0_8, d0_9, d0_10, d0_11, d0_12, d0_13, d0_14, d0_15, d0_16, d0_17, d0_18, d0_19, d0_20, d0_21, d0_22, d0_23, d0_24, d0_25, d0_26, d0_27, d0_28, d0_29, d0_30, d0_31, d0_32, d0_33, d0_34, d0_35, d0_36, d0_37, d0_38, d0_39, d0_40, d0_41, d0_42, d0_43, d0_44, d0_45, d0_46, d0_47, d0_48, d0_49, d0_50, d0_51, d0_52, d0_53, d0_54, d0_55, d0_56, d0_57, d0_58, d0_59, d0_60, d0_61, d0_62, d0_63, zero], dtype=(tl.int32,) * 64, is_pure=True, pack=1)
        at_w = weights_at + (k0 >> 24)
        w0, w1 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 0], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w2, w3 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 32], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w4, w5 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 64], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w6, w7 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 96], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w8, w9 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 128], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w10, w11 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 160], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w12, w13 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 192], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w14, w15 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 224], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w16, w17 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 256], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w18, w19 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 288], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w20, w21 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 320], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w22, w23 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 352], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w24, w25 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 384], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w26, w27 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 416], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w28, w29 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 448], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w30, w31 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 480], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        u0 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_0], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u1 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_1], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u2 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_2], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u3 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_3], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u4 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_4], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u5 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_5], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u6 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_6], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u7 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_7], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u8 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_8], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u9 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_9], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u10 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_10], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u11 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_11], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u12 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_12], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u13 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_13], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u14 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_14], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u15 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_15], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u16 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_16], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u17 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_17], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u18 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_18], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u19 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_19], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u20 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_20], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u21 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_21], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u22 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_22], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u23 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_23], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u24 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_24], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u25 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_25], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u26 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_26], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u27 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_27], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u28 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_28], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u29 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_29], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u30 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_30], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u31 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_31], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u32 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_32], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u33 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_33], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u34 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_34], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u35 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_35], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u36 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_36], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u37 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_37], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u38 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_38], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u39 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_39], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u40 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_40], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u41 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_41], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u42 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_42], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u43 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_43], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u44 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_44], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u45 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_45], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u46 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_46], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u47 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_47], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u48 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_48], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u49 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_49], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u50 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_50], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u51 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_51], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u52 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_52], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u53 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_53], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u54 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_54], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u55 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_55], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u56 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_56], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u57 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_57], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u58 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_58], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u59 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_59], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u60 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_60], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u61 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_61], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u62 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_62], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u63 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_63], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        c0 = u0 * w0
        c0 = tl.fma(u4, w2, c0)
        c0 = tl.fma(u8, w4, c0)
        c0 = tl.fma(u12, w6, c0)
        c0 = tl.fma(u16, w8, c0)
        c0 = tl.fma(u20, w10, c0)
        c0 = tl.fma(u24, w12, c0)
        c0 = tl.fma(u28, w14, c0)
        c1 = u1 * w1
        c1 = tl.fma(u5, w3, c1)
        c1 = tl.fma(u9, w5, c1)
        c1 = tl.fma(u13, w7, c1)
        c1 = tl.fma(u17, w9, c1)
        c1 = tl.fma(u21, w11, c1)
        c1 = tl.fma(u25, w13, c1)
        c1 = tl.fma(u29, w15, c1)
        v00 = c0 + c1
        c0 = u32 * w16
        c0 = tl.fma(u36, w18, c0)
        c0 = tl.fma(u40, w20, c0)
        c0 = tl.fma(u44, w22, c0)
        c0 = tl.fma(u48, w24, c0)
        c0 = tl.fma(u52, w26, c0)
        c0 = tl.fma(u56, w28, c0)
        c0 = tl.fma(u60, w30, c0)
        c1 = u33 * w17
        c1 = tl.fma(u37, w19, c1)
        c1 = tl.fma(u41, w21, c1)
        c1 = tl.fma(u45, w23, c1)
        c1 = tl.fma(u49, w25, c1)
        c1 = tl.fma(u53, w27, c1)
        c1 = tl.fma(u57, w29, c1)
        c1 = tl.fma(u61, w31, c1)
        v01 = c0 + c1
        c0 = u2 * w0
        c0 = tl.fma(u6, w2, c0)
        c0 = tl.fma(u10, w4, c0)
        c0 = tl.fma(u14, w6, c0)
        c0 = tl.fma(u18, w8, c0)
        c0 = tl.fma(u22, w10, c0)
        c0 = tl.fma(u26, w12, c0)
        c0 = tl.fma(u30, w14, c0)
        c1 = u3 * w1
        c1 = tl.fma(u7, w3, c1)
        c1 = tl.fma(u11, w5, c1)
        c1 = tl.fma(u15, w7, c1)
        c1 = tl.fma(u19, w9, c1)
        c1 = tl.fma(u23, w11, c1)
        c1 = tl.fma(u27, w13, c1)
        c1 = tl.fma(u31, w15, c1)
        v10 = c0 + c1
        c0 = u34 * w16
        c0 = tl.fma(u38, w18, c0)
        c0 = tl.fma(u42, w20, c0)
        c0 = tl.fma(u46, w22, c0)
        c0 = tl.fma(u50, w24, c0)
        c0 = tl.fma(u54, w26, c0)
        c0 = tl.fma(u58, w28, c0)
        c0 = tl.fma(u62, w30, c0)
        c1 = u35 * w17
        c1 = tl.fma(u39, w19, c1)
        c1 = tl.fma(u43, w21, c1)
        c1 = tl.fma(u47, w23, c1)
        c1 = tl.fma(u51, w25, c1)
        c1 = tl.fma(u55, w27, c1)
        c1 = tl.fma(u59, w29, c1)
        c1 = tl.fma(u63, w31, c1)
        v11 = c0 + c1
        kmax = tl.where(odd, k0 >> 16, k0 & 0xFFFF)
        scale = tl.where(kmax == 255, float('nan'), (kmax << 23).to(tl.float32, bitcast=True) * 0.0625)
        j = (T) * 64 + tl.where(odd, tok_hi, tok_lo)
        m0 = tl.where(odd, v10, v00) + tl.inline_asm_elementwise(SHFL1, '=f,f', [tl.where(odd, v00, v10)], dtype=tl.float32, is_pure=True, pack=1)
        m1 = tl.where(odd, v11, v01) + tl.inline_asm_elementwise(SHFL1, '=f,f', [tl.where(odd, v01, v11)], dtype=tl.float32, is_pure=True, pack=1)
        x = tl.where(second, m1, m0) + tl.inline_asm_elementwise(SHFL2, '=f,f', [tl.where(second, m0, m1)], dtype=tl.float32, is_pure=True, pack=1)
        tl.store(out_ptr + tl.where(second, out_row1, out_row0) + j, x * 4194304.0 * scale, mask=j < tl.where(second, limit1, limit0))
        done = x.to(tl.int32, bitcast=True)
        d0_0, d0_1, d0_2, d0_3, d0_4, d0_5, d0_6, d0_7, d0_8, d0_9, d0_10, d0_11, d0_12, d0_13, d0_14, d0_15, d0_16, d0_17, d0_18, d0_19, d0_20, d0_21, d0_22, d0_23, d0_24, d0_25, d0_26, d0_27, d0_28, d0_29, d0_30, d0_31, d0_32, d0_33, d0_34, d0_35, d0_36, d0_37, d0_38, d0_39, d0_40, d0_41, d0_42, d0_43, d0_44, d0_45, d0_46, d0_47, d0_48, d0_49, d0_50, d0_51, d0_52, d0_53, d0_54, d0_55, d0_56, d0_57, d0_58, d0_59, d0_60, d0_61, d0_62, d0_63 = tl.inline_asm_elementwise(ISSUE_256_H1, ISSUE_C_128, [a0_0, a0_1, a0_2, a0_3, a0_4, a0_5, a0_6, a0_7, a0_8, a0_9, a0_10, a0_11, a0_12, a0_13, a0_14, a0_15, query_descriptor], dtype=(tl.int32,) * 64, is_pure=True, pack=1)
        d0_0, d0_1, d0_2, d0_3, d0_4, d0_5, d0_6, d0_7, d0_8, d0_9, d0_10, d0_11, d0_12, d0_13, d0_14, d0_15, d0_16, d0_17, d0_18, d0_19, d0_20, d0_21, d0_22, d0_23, d0_24, d0_25, d0_26, d0_27, d0_28, d0_29, d0_30, d0_31, d0_32, d0_33, d0_34, d0_35, d0_36, d0_37, d0_38, d0_39, d0_40, d0_41, d0_42, d0_43, d0_44, d0_45, d0_46, d0_47, d0_48, d0_49, d0_50, d0_51, d0_52, d0_53, d0_54, d0_55, d0_56, d0_57, d0_58, d0_59, d0_60, d0_61, d0_62, d0_63 = tl.inline_asm_elementwise(WAIT_128_0, WAIT_C_128, [d0_0, d0_1, d0_2, d0_3, d0_4, d0_5, d0_6, d0_7, d0_8, d0_9, d0_10, d0_11, d0_12, d0_13, d0_14, d0_15, d0_16, d0_17, d0_18, d0_19, d0_20, d0_21, d0_22, d0_23, d0_24, d0_25, d0_26, d0_27, d0_28, d0_29, d0_30, d0_31, d0_32, d0_33, d0_34, d0_35, d0_36, d0_37, d0_38, d0_39, d0_40, d0_41, d0_42, d0_43, d0_44, d0_45, d0_46, d0_47, d0_48, d0_49, d0_50, d0_51, d0_52, d0_53, d0_54, d0_55, d0_56, d0_57, d0_58, d0_59, d0_60, d0_61, d0_62, d0_63, done], dtype=(tl.int32,) * 64, is_pure=True, pack=1)
        at_w = weights_at + (k0 >> 24)
        w32, w33 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 512], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w34, w35 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 544], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w36, w37 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 576], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w38, w39 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 608], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w40, w41 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 640], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w42, w43 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 672], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w44, w45 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 704], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w46, w47 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 736], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w48, w49 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 768], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w50, w51 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 800], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w52, w53 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 832], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w54, w55 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 864], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w56, w57 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 896], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w58, w59 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 928], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w60, w61 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 960], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        w62, w63 = tl.inline_asm_elementwise(LDSW, '=f,=f,r', [at_w + 992], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
        u0 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_0], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u1 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_1], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u2 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_2], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u3 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_3], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u4 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_4], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u5 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_5], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u6 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_6], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u7 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_7], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u8 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_8], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u9 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_9], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u10 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_10], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u11 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_11], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u12 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_12], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u13 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_13], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u14 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_14], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u15 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_15], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u16 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_16], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u17 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_17], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u18 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_18], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u19 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_19], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u20 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_20], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u21 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_21], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u22 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_22], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u23 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_23], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u24 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_24], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u25 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_25], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u26 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_26], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u27 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_27], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u28 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_28], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u29 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_29], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u30 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_30], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u31 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_31], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u32 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_32], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u33 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_33], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u34 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_34], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u35 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_35], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u36 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_36], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u37 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_37], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u38 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_38], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u39 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_39], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u40 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_40], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u41 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_41], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u42 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_42], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u43 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_43], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u44 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_44], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u45 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_45], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u46 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_46], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u47 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_47], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u48 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_48], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u49 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_49], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u50 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_50], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u51 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_51], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u52 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_52], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u53 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_53], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u54 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_54], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u55 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_55], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u56 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_56], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u57 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_57], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u58 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_58], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u59 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_59], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u60 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_60], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u61 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_61], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u62 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_62], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        u63 = tl.inline_asm_elementwise(RELU, '=r,r', [d0_63], dtype=tl.int32, is_pure=True, pack=1).to(tl.float32, bitcast=True)
        c0 = u0 * w32
        c0 = tl.fma(u4, w34, c0)
        c0 = tl.fma(u8, w36, c0)
        c0 = tl.fma(u12, w38, c0)
        c0 = tl.fma(u16, w40, c0)
        c0 = tl.fma(u20, w42, c0)
        c0 = tl.fma(u24, w44, c0)
        c0 = tl.fma(u28, w46, c0)
        c1 = u1 * w33
        c1 = tl.fma(u5, w35, c1)
        c1 = tl.fma(u9, w37, c1)
        c1 = tl.fma(u13, w39, c1)
        c1 = tl.fma(u17, w41, c1)
        c1 = tl.fma(u21, w43, c1)
        c1 = tl.fma(u25, w45, c1)
        c1 = tl.fma(u29, w47, c1)
        v00 = c0 + c1
        c0 = u32 * w48
        c0 = tl.fma(u36, w50, c0)
        c0 = tl.fma(u40, w52, c0)
        c0 = tl.fma(u44, w54, c0)
        c0 = tl.fma(u48, w56, c0)
        c0 = tl.fma(u52, w58, c0)
        c0 = tl.fma(u56, w60, c0)
        c0 = tl.fma(u60, w62, c0)
        c1 = u33 * w49
        c1 = tl.fma(u37, w51, c1)
        c1 = tl.fma(u41, w53, c1)
        c1 = tl.fma(u45, w55, c1)
        c1 = tl.fma(u49, w57, c1)
        c1 = tl.fma(u53, w59, c1)
        c1 = tl.fma(u57, w61, c1)
        c1 = tl.fma(u61, w63, c1)
        v01 = c0 + c1
        c0 = u2 * w32
        c0 = tl.fma(u6, w34, c0)
        c0 = tl.fma(u10, w36, c0)
        c0 = tl.fma(u14, w38, c0)
        c0 = tl.fma(u18, w40, c0)
        c0 = tl.fma(u22, w42, c0)
        c0 = tl.fma(u26, w44, c0)
        c0 = tl.fma(u30, w46, c0)
        c1 = u3 * w33
        c1 = tl.fma(u7, w35, c1)
        c1 = tl.fma(u11, w37, c1)
        c1 = tl.fma(u15, w39, c1)
        c1 = tl.fma(u19, w41, c1)
        c1 = tl.fma(u23, w43, c1)
        c1 = tl.fma(u27, w45, c1)
        c1 = tl.fma(u31, w47, c1)
        v10 = c0 + c1
        c0 = u34 * w48
        c0 = tl.fma(u38, w50, c0)
        c0 = tl.fma(u42, w52, c0)
        c0 = tl.fma(u46, w54, c0)
        c0 = tl.fma(u50, w56, c0)
        c0 = tl.fma(u54, w58, c0)
        c0 = tl.fma(u58, w60, c0)
        c0 = tl.fma(u62, w62, c0)
        c1 = u35 * w49
        c1 = tl.fma(u39, w51, c1)
        c1 = tl.fma(u43, w53, c1)
        c1 = tl.fma(u47, w55, c1)
        c1 = tl.fma(u51, w57, c1)
        c1 = tl.fma(u55, w59, c1)
        c1 = tl.fma(u59, w61, c1)
        c1 = tl.fma(u63, w63, c1)
        v11 = c0 + c1
        kmax = tl.where(odd, k0 >> 16, k0 & 0xFFFF)
        scale = tl.where(kmax == 255, float('nan'), (kmax << 23).to(tl.float32, bitcast=True) * 0.0625)
        j = (T) * 64 + tl.where(odd, tok_hi, tok_lo)
        m0 = tl.where(odd, v10, v00) + tl.inline_asm_elementwise(SHFL1, '=f,f', [tl.where(odd, v00, v10)], dtype=tl.float32, is_pure=True, pack=1)
        m1 = tl.where(odd, v11, v01) + tl.inline_asm_elementwise(SHFL1, '=f,f', [tl.where(odd, v01, v11)], dtype=tl.float32, is_pure=True, pack=1)
        x = tl.where(second, m1, m0) + tl.inline_asm_elementwise(SHFL2, '=f,f', [tl.where(second, m0, m1)], dtype=tl.float32, is_pure=True, pack=1)
        tl.store(out_ptr + tl.where(second, out_row3, out_row2) + j, x * 4194304.0 * scale, mask=j < tl.where(second, limit3, limit2))
        done = x.to(tl.int32, bitcast=True)
        k0 = tl.inline_asm_elementwise(KMAX, '=r,r', [q1e], dtype=tl.int32, is_pure=True, pack=1)
        s_lo = 3 - ((k0 & 0xFFFF) - (q1e & 0xFFFF))
        s_hi = 3 - ((k0 >> 16) - (q1e >> 16))
        fewest = tl.minimum(fewest, tl.minimum(s_lo, s_hi))
        lo_l, hi_l = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [s_lo], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        lo_h, hi_h = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [s_hi], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_0, a0_2 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1x0, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_1, a0_3 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1y0, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_4, a0_6 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1x1, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_5, a0_7 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1y1, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_8, a0_10 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1x2, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_9, a0_11 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1y2, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_12, a0_14 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1x3, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        a0_13, a0_15 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [q1y3, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        q1x0, q1x1, q1x2, q1x3 = q2x0, q2x1, q2x2, q2x3
        q1y0, q1y1, q1y2, q1y3 = q2y0, q2y1, q2y2, q2y3
        q1e = q2el | (q2eh << 16)
    keys = tl.min(fewest, axis=0)
    return tl.minimum(fewest_in, tl.where(tl.min(query_fold, axis=0) < 0, -1, keys))


@triton.jit
def wgmma_request(fewest, out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride, weights_ptr,
                  weights_stride, weights_head_stride, bt_row, block_table_page_stride, first_row, rows_here, row_ends,
                  page_begin, page_end, ROWS: tl.constexpr):
    """The hot pass of one row block on wgmmas in inline PTX (``wgmma_rows{ROWS}``)."""
    if ROWS == 2:
        fewest = wgmma_rows2(
            fewest, out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride, weights_ptr,
            weights_stride, weights_head_stride, bt_row, block_table_page_stride, first_row, rows_here,
            row_ends, page_begin, page_end)
    elif ROWS == 4:
        fewest = wgmma_rows4(
            fewest, out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride, weights_ptr,
            weights_stride, weights_head_stride, bt_row, block_table_page_stride, first_row, rows_here,
            row_ends, page_begin, page_end)
    else:
        tl.static_assert(False, "wgmma: 2 or 4 rows per block")
    return fewest

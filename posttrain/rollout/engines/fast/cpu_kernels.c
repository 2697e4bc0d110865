/* The `fast` engine's CPU fp32 decode kernels; built and loaded by cpu_kernels.py, which
   documents them. Compiled with -O3 -march=native -fopenmp -ffp-contract=fast. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef float v8 __attribute__((vector_size(32)));  /* 8 floats: AVX2/AVX-512 ymm, 2x NEON */
#define SHUF(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)

static inline v8 load8(const float* p) { v8 v; memcpy(&v, p, sizeof v); return v; }
static inline void store8(float* p, v8 v) { memcpy(p, &v, sizeof v); }

/* a[j] holds 8 partial sums of dot j; returns the 8 dots (an 8x8 transpose-add, so one
   reduction serves 8 keys instead of a horizontal sum per key). */
static inline v8 hsum8x8(const v8* a) {
    v8 b0 = SHUF(a[0], a[1], 0, 8, 2, 10, 4, 12, 6, 14) + SHUF(a[0], a[1], 1, 9, 3, 11, 5, 13, 7, 15);
    v8 b1 = SHUF(a[2], a[3], 0, 8, 2, 10, 4, 12, 6, 14) + SHUF(a[2], a[3], 1, 9, 3, 11, 5, 13, 7, 15);
    v8 b2 = SHUF(a[4], a[5], 0, 8, 2, 10, 4, 12, 6, 14) + SHUF(a[4], a[5], 1, 9, 3, 11, 5, 13, 7, 15);
    v8 b3 = SHUF(a[6], a[7], 0, 8, 2, 10, 4, 12, 6, 14) + SHUF(a[6], a[7], 1, 9, 3, 11, 5, 13, 7, 15);
    v8 c0 = SHUF(b0, b1, 0, 1, 8, 9, 4, 5, 12, 13) + SHUF(b0, b1, 2, 3, 10, 11, 6, 7, 14, 15);
    v8 c1 = SHUF(b2, b3, 0, 1, 8, 9, 4, 5, 12, 13) + SHUF(b2, b3, 2, 3, 10, 11, 6, 7, 14, 15);
    return SHUF(c0, c1, 0, 1, 2, 3, 8, 9, 10, 11) + SHUF(c0, c1, 4, 5, 6, 7, 12, 13, 14, 15);
}

typedef int32_t vi8 __attribute__((vector_size(32)));

static inline v8 splat(float x) { return (v8){x, x, x, x, x, x, x, x}; }
static inline v8 select8(vi8 mask, v8 a, v8 b) { return (v8)(((vi8)a & mask) | ((vi8)b & ~mask)); }

/* exp of 8 values <= 0 (Cephes expf: range reduction by ln 2, degree-6 polynomial; relative
   error < 1e-7), in vector form because no scalar formulation (libm expf, floorf, a
   union pun) let the compiler vectorise the softmax loop. */
static inline v8 exp8(v8 x) {
    x = select8(x < splat(-87.0f), splat(-87.0f), x);
    const v8 t = x * 1.44269504088896341f + 0.5f;
    vi8 e = __builtin_convertvector(t, vi8);  /* truncation; floor is one less below it */
    e += (vi8)(__builtin_convertvector(e, v8) > t);  /* a true comparison is -1 */
    const v8 fx = __builtin_convertvector(e, v8);
    x = x - fx * 0.693359375f + fx * 2.12194440e-4f;
    v8 y = splat(1.9875691500E-4f);
    y = y * x + 1.3981999507E-3f;
    y = y * x + 8.3334519073E-3f;
    y = y * x + 4.1665795894E-2f;
    y = y * x + 1.6666665459E-1f;
    y = y * x + 5.0000001201E-1f;
    y = y * x * x + x + 1.0f;
    return y * (v8)((e + 127) << 23);  /* times 2^fx */
}

/* p[0..n-1] <- softmax(p[0..n-1]) */
static inline void softmax(float* p, int64_t n) {
    int64_t l = 0;
    v8 mv = splat(-INFINITY);
    for (; l + 8 <= n; l += 8) { v8 x = load8(p + l); mv = select8(x > mv, x, mv); }
    float m = -INFINITY;
    for (int j = 0; j < 8; j++) m = mv[j] > m ? mv[j] : m;
    for (; l < n; l++) m = p[l] > m ? p[l] : m;
    v8 zv = splat(0.f);
    for (l = 0; l + 8 <= n; l += 8) { v8 y = exp8(load8(p + l) - m); store8(p + l, y); zv += y; }
    float z = 0.f;
    for (int j = 0; j < 8; j++) z += zv[j];
    for (; l < n; l++) { p[l] = expf(p[l] - m); z += p[l]; }
    const float inv = 1.f / z;
    for (l = 0; l < n; l++) p[l] *= inv;
}

/* scores p[l] = (q . key l) * scale for l < n; key l = (l < sh ? ks : ko) + l * D */
static inline __attribute__((always_inline)) void scores(const float* q, const float* ks, const float* ko, int64_t sh,
                                                         int64_t n, int64_t D, float scale, float* p) {
    int64_t l = 0;
    if (D % 8 == 0 && D <= 256) {
        for (; l + 8 <= n; l += 8) {
            v8 a[8] = {0};
            const float* k[8];
            for (int j = 0; j < 8; j++) k[j] = (l + j < sh ? ks : ko) + (l + j) * D;
            for (int64_t d = 0; d < D; d += 8) {
                v8 qv = load8(q + d);
                for (int j = 0; j < 8; j++) a[j] += qv * load8(k[j] + d);
            }
            store8(p + l, hsum8x8(a) * scale);
        }
    }
    for (; l < n; l++) {
        const float* k = (l < sh ? ks : ko) + l * D;
        float s = 0.f;
        for (int64_t d = 0; d < D; d++) s += q[d] * k[d];
        p[l] = s * scale;
    }
}

/* o = sum_l p[l] * value l, value l = (l < sh ? vs : vo) + l * D */
static inline __attribute__((always_inline)) void weighted(const float* p, const float* vs, const float* vo, int64_t sh, int64_t n, int64_t D, float* o) {
    if (D % 8 == 0 && D <= 256) {
        v8 acc[32] = {0};
        for (int64_t l = 0; l < n; l++) {
            const float* v = (l < sh ? vs : vo) + l * D;
            const v8 w = {p[l], p[l], p[l], p[l], p[l], p[l], p[l], p[l]};
            for (int64_t c = 0; c < D / 8; c++) acc[c] += w * load8(v + 8 * c);
        }
        for (int64_t c = 0; c < D / 8; c++) store8(o + 8 * c, acc[c]);
        return;
    }
    for (int64_t d = 0; d < D; d++) o[d] = 0.f;
    for (int64_t l = 0; l < n; l++) {
        const float* v = (l < sh ? vs : vo) + l * D;
        for (int64_t d = 0; d < D; d++) o[d] += p[l] * v[d];
    }
}

/* one query head: softmax(q . keys * scale) . values over positions 0..n-1 */
static inline __attribute__((always_inline)) void attend(const float* q, const float* kc, const float* vc,
                                                         int64_t from, int64_t own, int64_t sh, int64_t n, int64_t D,
                                                         float scale, float* p, float* out) {
    scores(q, kc + from, kc + own, sh, n, D, scale, p);
    softmax(p, n);
    weighted(p, vc + from, vc + own, sh, n, D, out);
}

/* Prefetch a (lane, head)'s own keys and values, positions sh..n-1, while the previous row
   is computed: each is a few KB that no other row reads, so it comes from memory. */
static inline void prefetch_own(const float* kc, const float* vc, int64_t lane, int64_t h, int64_t sh, int64_t n,
                                int64_t KVH, int64_t CAP, int64_t D) {
    const int64_t base = (lane * KVH + h) * CAP * D;
    for (int64_t x = sh * D; x < n * D; x += 16) {
        __builtin_prefetch(kc + base + x, 0, 1);  /* low locality: measured faster than into L1 */
        __builtin_prefetch(vc + base + x, 0, 1);
    }
}

/* y = HF rotary embedding of x (one head, D values) with this position's cos and sin:
   x * cos + rotate_half(x) * sin, rotate_half(x) = (-x[D/2:], x[:D/2]) */
static inline void rope(const float* x, const float* c, const float* s, int64_t D, float* y) {
    const int64_t half = D / 2;
    for (int64_t d = 0; d < half; d++) y[d] = x[d] * c[d] - x[d + half] * s[d];
    for (int64_t d = half; d < D; d++) y[d] = x[d] * c[d] + x[d - half] * s[d];
}

/* qkv [B, T, (KVH*G + 2*KVH) * D]: the fused projection's output, queries (head h*G+g),
   then keys, then values, before the rotary embedding; cos, sin [MAXPOS, D] (the model's
   tables); kc, vc [NL, KVH, CAP, D]; out [B, T, KVH*G*D] (heads in HF order). All
   contiguous. Row b rotates and writes its T new keys and values at positions
   len[b]-1 .. len[b]+T-2 of lane rows[b]; its query t, rotated, then attends to positions
   0 .. len[b]-1+t, reading lane src[b] below shared[b] (the shared prompt, always before
   the new positions) and its own lane from there on. order[B] is the visiting order (rows
   sharing a prompt adjacent). WINDOW > 0 (a sliding-window layer): query t sees only the
   last WINDOW of those positions. Rows write only their own lane, at positions no other
   row reads, so rows run in parallel. D <= 256. */
int decode_attention(const float* qkv, const float* cos, const float* sin, int64_t MAXPOS, float* kc, float* vc,
                     const int64_t* rows, const int64_t* len, const int64_t* src, const int64_t* shared,
                     const int64_t* order, float* out, int64_t B, int64_t T, int64_t KVH, int64_t G,
                     int64_t CAP, int64_t D, float scale, int64_t WINDOW, int nthreads) {
    const int64_t W = (KVH * G + 2 * KVH) * D;  /* one token's q|k|v */
    int failed = 0;
    #pragma omp parallel num_threads(nthreads) if(nthreads > 1)
    {
        float* p = (float*)malloc(sizeof(float) * (size_t)(CAP + 8));  /* one query head's scores */
        float qr[256];  /* one rotated query head */
        if (!p) {
            #pragma omp atomic write
            failed = 1;
        }
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < B; i++) {
            if (!p) continue;
            const int64_t b = order[i], n0 = len[b], sh = shared[b] < n0 - 1 ? shared[b] : n0 - 1;
            for (int64_t t = 0; t < T; t++) {
                const int64_t ps = n0 - 1 + t < MAXPOS ? n0 - 1 + t : MAXPOS - 1;  /* padding may run past */
                const float* tok = qkv + (b * T + t) * W;
                for (int64_t h = 0; h < KVH; h++) {
                    const int64_t at = ((rows[b] * KVH + h) * CAP + n0 - 1 + t) * D;
                    rope(tok + (KVH * G + h) * D, cos + ps * D, sin + ps * D, D, kc + at);
                    memcpy(vc + at, tok + (KVH * G + KVH + h) * D, sizeof(float) * (size_t)D);
                }
            }
            if (i + 1 < B) {  /* the next row's own keys and values come from memory: start them now */
                const int64_t b2 = order[i + 1], n2 = len[b2], sh2 = shared[b2] < n2 - 1 ? shared[b2] : n2 - 1;
                for (int64_t h = 0; h < KVH; h++) prefetch_own(kc, vc, rows[b2], h, sh2, n2, KVH, CAP, D);
            }
            for (int64_t t = 0; t < T; t++) {
                const int64_t n = n0 + t, ps = n - 1 < MAXPOS ? n - 1 : MAXPOS - 1;
                /* keys lo..n-1: shifting both bases by lo keeps key l at (l < sh ? src : own) + l*D */
                const int64_t lo = WINDOW > 0 && n > WINDOW ? n - WINDOW : 0, m = n - lo, shw = sh - lo;
                for (int64_t h = 0; h < KVH; h++) {
                    const int64_t own = (rows[b] * KVH + h) * CAP * D + lo * D, from = (src[b] * KVH + h) * CAP * D + lo * D;
                    for (int64_t g = 0; g < G; g++) {
                        const int64_t head = ((b * T + t) * KVH + h) * G + g;
                        rope(qkv + (b * T + t) * W + (h * G + g) * D, cos + ps * D, sin + ps * D, D, qr);
                        switch (D) {  /* common head sizes get code with the size folded in */
                        case 32: attend(qr, kc, vc, from, own, shw, m, 32, scale, p, out + head * D); break;
                        case 64: attend(qr, kc, vc, from, own, shw, m, 64, scale, p, out + head * D); break;
                        case 128: attend(qr, kc, vc, from, own, shw, m, 128, scale, p, out + head * D); break;
                        default: attend(qr, kc, vc, from, own, shw, m, D, scale, p, out + head * D);
                        }
                    }
                }
            }
        }
        free(p);
    }
    return failed;
}

typedef uint32_t vu8 __attribute__((vector_size(32)));

/* log of 8 positive normal floats (Cephes logf: mantissa in [sqrt(1/2), sqrt(2)), degree-8
   polynomial; relative error ~1e-7), vectorised like exp8 */
static inline v8 log8(v8 x) {
    const vi8 xi = (vi8)x;
    vi8 e = ((xi >> 23) & 0xff) - 126;
    v8 m = (v8)((xi & 0x007fffff) | 0x3f000000);  /* [0.5, 1) */
    const vi8 lt = (vi8)(m < splat(0.707106781186547524f));
    e += lt;  /* -1 where m < sqrt(1/2): then m -> 2m */
    m = m - 1.0f + (v8)((vi8)m & lt);
    const v8 z = m * m;
    v8 y = splat(7.0376836292E-2f);
    y = y * m - 1.1514610310E-1f;
    y = y * m + 1.1676998740E-1f;
    y = y * m - 1.2420140846E-1f;
    y = y * m + 1.4249322787E-1f;
    y = y * m - 1.6668057665E-1f;
    y = y * m + 2.0000714765E-1f;
    y = y * m - 2.4999993993E-1f;
    y = y * m + 3.3333331174E-1f;
    y = y * m * z;
    const v8 fe = __builtin_convertvector(e, v8);
    y = y - 2.12194440e-4f * fe - 0.5f * z;
    return m + y + 0.693359375f * fe;
}

/* lowbias32 (C. Wellons), the same hash as sampling.mix32, on 8 lanes */
static inline vu8 mix32x8(vu8 x) {
    x ^= x >> 16; x *= 0x7FEB352Du; x ^= x >> 15; x *= 0x846CA68Bu; x ^= x >> 16;
    return x;
}
static inline uint32_t mix32(uint32_t x) {
    x ^= x >> 16; x *= 0x7FEB352Du; x ^= x >> 15; x *= 0x846CA68Bu; x ^= x >> 16;
    return x;
}

/* Per row b of logits [B, V]: the token (argmax of logits / temp + Gumbel noise drawn from
   (row key, cols[v]) exactly as sampling.uniforms does, the row key being
   sampling.row_keys(seed, sample, pos, stream); argmax of the logits when temp is 0) and
   its raw log-probability (log_softmax at temperature 1). Ties go to the lowest id, as
   torch.argmax. */
int sample_rows(const float* logits, const float* temp, const int64_t* seed, const int64_t* sample,
                const int64_t* pos, int64_t stream, const int64_t* cols, int64_t B, int64_t V, int64_t* tok,
                float* lp, int nthreads) {
    int failed = 0;
    #pragma omp parallel num_threads(nthreads) if(nthreads > 1)
    {
        uint32_t* c32 = (uint32_t*)malloc(sizeof(uint32_t) * (size_t)(V + 8));
        if (!c32) {
            #pragma omp atomic write
            failed = 1;
        } else {
            for (int64_t v = 0; v < V; v++) c32[v] = (uint32_t)cols[v];
        }
        #pragma omp for schedule(static)
        for (int64_t b = 0; b < B; b++) {
            if (!c32) continue;
            const float* x = logits + b * V;
            v8 mv = splat(-INFINITY);
            int64_t v = 0;
            for (; v + 8 <= V; v += 8) { const v8 xv = load8(x + v); mv = select8(xv > mv, xv, mv); }
            float m = -INFINITY;
            for (int j = 0; j < 8; j++) m = mv[j] > m ? mv[j] : m;
            for (; v < V; v++) m = x[v] > m ? x[v] : m;
            v8 zv = splat(0.f);
            for (v = 0; v + 8 <= V; v += 8) zv += exp8(load8(x + v) - m);
            float z = 0.f;
            for (int j = 0; j < 8; j++) z += zv[j];
            for (; v < V; v++) z += expf(x[v] - m);
            int64_t best = 0;
            if (temp[b] > 0.f) {
                uint32_t key = mix32((uint32_t)seed[b] ^ (uint32_t)stream);
                key = mix32(key ^ (uint32_t)((uint64_t)seed[b] >> 32));
                key = mix32(key ^ (uint32_t)sample[b]);
                key = mix32(key ^ (uint32_t)pos[b]);
                const float inv_t = 1.f / temp[b];
                /* each lane keeps its own first maximum (strict >, ascending v), then the lanes
                   are merged: the largest score, the lowest id among equal ones, as one scan */
                v8 topv = splat(-INFINITY);
                vi8 idx = {0, 1, 2, 3, 4, 5, 6, 7}, bestv = {0, 0, 0, 0, 0, 0, 0, 0};
                for (v = 0; v + 8 <= V; v += 8, idx += 8) {
                    vu8 cv;
                    memcpy(&cv, c32 + v, sizeof cv);
                    const vu8 bits = mix32x8(cv ^ key) >> 9;  /* 23 bits: u < 1 exactly (sampling.unit_floats) */
                    const v8 u = (__builtin_convertvector(bits, v8) + 0.5f) * (1.0f / 8388608.0f);
                    const v8 sc = load8(x + v) * inv_t - log8(-log8(u));
                    const vi8 gt = (vi8)(sc > topv);
                    topv = select8(gt, sc, topv);
                    bestv = (bestv & ~gt) | (idx & gt);
                }
                float top = -INFINITY;
                best = 0;
                for (int j = 0; j < 8; j++)
                    if (topv[j] > top || (topv[j] == top && topv[j] > -INFINITY && bestv[j] < best)) {
                        top = topv[j];
                        best = bestv[j];
                    }
                for (; v < V; v++) {
                    const float u = ((float)(mix32(key ^ c32[v]) >> 9) + 0.5f) * (1.0f / 8388608.0f);
                    const float sc = x[v] * inv_t - logf(-logf(u));
                    if (sc > top) { top = sc; best = v; }
                }
            } else {  /* argmax: the first position holding the maximum */
                while (best < V && !(x[best] == m)) best++;
                if (best == V) best = 0;
            }
            tok[b] = best;
            lp[b] = (x[best] - m) - logf(z);
        }
        free(c32);
    }
    return failed;
}

/* out [N, I] = silu(gu[:, :I]) * gu[:, I:] for gu [N, 2I] (the fused gate|up projection):
   one pass instead of two strided tensor ops; silu(x) = x / (1 + exp(-x)) with exp8 on
   -|x| so its argument stays <= 0. */
void silu_mul(const float* gu, float* out, int64_t N, int64_t I, int nthreads) {
    #pragma omp parallel for schedule(static) num_threads(nthreads) if(nthreads > 1)
    for (int64_t r = 0; r < N; r++) {
        const float* g = gu + r * 2 * I;
        const float* u = g + I;
        float* o = out + r * I;
        int64_t i = 0;
        for (; i + 8 <= I; i += 8) {
            const v8 x = load8(g + i);
            const vi8 neg = (vi8)(x < splat(0.f));
            const v8 e = exp8(select8(neg, x, -x));  /* exp(-|x|) */
            /* sigmoid(x) = 1 / (1 + exp(-x)): for x < 0 it is e / (1 + e) */
            const v8 sig = select8(neg, e / (1.0f + e), 1.0f / (1.0f + e));
            store8(o + i, x * sig * load8(u + i));
        }
        for (; i < I; i++) o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
}

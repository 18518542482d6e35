// SPDX-License-Identifier: GPL-2.0
/*
 * kubeblade-leds: WS2812 bit streams for a PWM serializer.
 *
 * A WS2812 bit is a high pulse and a low one, about 1.25 us in all: a short
 * high (T0H, 0.4 us) is a 0, a long one (T1H, 0.8 us) is a 1, each within
 * 0.15 us. A serializer clocked at a few MHz draws each bit as a few
 * sub-bits, shifted out of 32-bit FIFO words MSB first. Nothing here touches
 * hardware: it is what the KUnit suite tests.
 */

#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/limits.h>
#include <linux/math64.h>
#include <linux/string.h>
#include <linux/time64.h>

#include "kubeblade-leds.h"

static unsigned int kbl_sub_bits(unsigned long rate_hz, unsigned int ns)
{
	return DIV_ROUND_CLOSEST_ULL((u64)ns * rate_hz, NSEC_PER_SEC);
}

static u64 kbl_sub_bits_ns(unsigned long rate_hz, unsigned int n)
{
	return DIV_ROUND_CLOSEST_ULL((u64)n * NSEC_PER_SEC, rate_hz);
}

static bool kbl_within(u64 got, unsigned int want, unsigned int tol)
{
	return got + tol >= want && got <= want + tol;
}

/**
 * kbl_layout_for_rate() - how a serializer at @rate_hz draws WS2812 bits
 * @rate_hz: the serializer clock
 * @range_extra_tick: 1 when the range register counts one more than it
 *	holds (RP1), 0 when it is the bit count (BCM2711)
 * @l: the layout
 *
 * A byte goes into one word when its sub-bits fit (3 sub-bits a bit at
 * ~2.4 MHz: 24-bit words, the old agent's scheme). Otherwise whole bits
 * share a word; at 50 MHz a bit takes two words (64 sub-bits). Every word of
 * whole bits ends low, so the range is the word's width: a range register
 * counting one extra tick only stretches a low gap. Two-word bits do not end
 * low inside, so there the range accounts for the extra tick.
 *
 * Return: 0, or -ERANGE when the clock cannot meet WS2812 timing.
 */
int kbl_layout_for_rate(unsigned long rate_hz, unsigned int range_extra_tick,
			struct kbl_layout *l)
{
	unsigned int sub;

	if (!rate_hz || rate_hz > 1000000000UL)
		return -ERANGE;
	memset(l, 0, sizeof(*l));
	sub = kbl_sub_bits(rate_hz, KBL_BIT_NS);
	l->high0 = kbl_sub_bits(rate_hz, KBL_T0H_NS);
	l->high1 = kbl_sub_bits(rate_hz, KBL_T1H_NS);
	if (sub > 32) {
		sub = 64;
		l->word_bits = 32;
		l->range = 32 - range_extra_tick;
	} else if (sub && 8 * sub <= 32) {
		l->word_bits = 8 * sub;
		l->range = l->word_bits;
	} else if (sub) {
		l->word_bits = (32 / sub) * sub;
		l->range = l->word_bits;
	}
	l->sub_bits = sub;
	if (!l->high0 || l->high1 <= l->high0 || sub <= l->high1 ||
	    !kbl_within(kbl_sub_bits_ns(rate_hz, l->high0), KBL_T0H_NS, KBL_TOL_NS) ||
	    !kbl_within(kbl_sub_bits_ns(rate_hz, l->high1), KBL_T1H_NS, KBL_TOL_NS) ||
	    !kbl_within(kbl_sub_bits_ns(rate_hz, sub), KBL_BIT_NS, KBL_BIT_TOL_NS))
		return -ERANGE;
	return 0;
}

/**
 * kbl_frame_bytes() - lay out the LEDs' colours in wire order
 * @rgb: red, green, blue of each LED, top LED first
 * @order: the byte order the LEDs read
 * @out: the bytes, first LED first
 */
void kbl_frame_bytes(const u8 rgb[KBL_NUM_LEDS][3], enum kbl_order order,
		     u8 out[KBL_FRAME_BYTES])
{
	unsigned int i;

	for (i = 0; i < KBL_NUM_LEDS; i++) {
		if (order == KBL_ORDER_GRB) {
			out[3 * i] = rgb[i][1];
			out[3 * i + 1] = rgb[i][0];
		} else {
			out[3 * i] = rgb[i][0];
			out[3 * i + 1] = rgb[i][1];
		}
		out[3 * i + 2] = rgb[i][2];
	}
}

/**
 * kbl_encode() - draw bytes as serializer words
 * @l: the layout
 * @data: bytes in wire order
 * @len: how many
 * @trailing_words: low words to add, which hold the line low while the
 *	serializer repeats the last word
 * @f: the frame
 *
 * Sub-bits are packed MSB first into words of @l->word_bits, each
 * MSB-aligned in 32 bits; the last word is padded low.
 *
 * Return: 0, or -E2BIG when the frame would not fit.
 */
int kbl_encode(const struct kbl_layout *l, const u8 *data, unsigned int len,
	       unsigned int trailing_words, struct kbl_frame *f)
{
	unsigned int i, bit, sub, n = 0;
	u32 cur = 0;

	memset(f, 0, sizeof(*f));
	f->range = l->range;
	for (i = 0; i < len; i++) {
		for (bit = 0; bit < 8; bit++) {
			unsigned int high = data[i] & (0x80 >> bit) ? l->high1 : l->high0;

			for (sub = 0; sub < l->sub_bits; sub++) {
				if (sub < high)
					cur |= BIT(31 - n);
				if (++n < l->word_bits)
					continue;
				if (f->n_words >= KBL_MAX_WORDS)
					return -E2BIG;
				f->words[f->n_words++] = cur;
				cur = 0;
				n = 0;
			}
		}
	}
	if (n) {
		if (f->n_words >= KBL_MAX_WORDS)
			return -E2BIG;
		f->words[f->n_words++] = cur;
	}
	if (f->n_words + trailing_words > KBL_MAX_WORDS)
		return -E2BIG;
	f->n_words += trailing_words;	/* already zero */
	return 0;
}

/**
 * kbl_ns_to_ticks() - a duration in clock ticks, rounded down (the PWM
 * framework expects ->apply() not to exceed what was asked for)
 * @ns: the duration
 * @rate_hz: the clock
 *
 * Return: the ticks, at most U32_MAX (the width of the PWM registers).
 */
u32 kbl_ns_to_ticks(u64 ns, unsigned long rate_hz)
{
	u64 t;

	if (ns > 10ULL * NSEC_PER_SEC)
		return U32_MAX;
	t = div_u64(ns * rate_hz, NSEC_PER_SEC);
	return t > U32_MAX ? U32_MAX : t;
}

/**
 * kbl_ticks_to_ns() - clock ticks as a duration, rounded up
 * @ticks: the ticks
 * @rate_hz: the clock
 *
 * Return: nanoseconds.
 */
u64 kbl_ticks_to_ns(u32 ticks, unsigned long rate_hz)
{
	return DIV_ROUND_UP_ULL((u64)ticks * NSEC_PER_SEC, rate_hz);
}

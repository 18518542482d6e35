// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the pure parts of kubeblade-leds: serializer timing,
 * colour to bit stream in the byte order the blade's LEDs read, frame and
 * reset layout, fan ticks, and the brightness scaling the LED class applies.
 *
 * Built as its own module (kubeblade-leds-test.ko) or into a kernel; it
 * compiles ws2812.c in, so it needs neither hardware nor the driver loaded.
 */

#include <kunit/test.h>
#include <linux/led-class-multicolor.h>
#include <linux/module.h>

#include "ws2812.c"

#define BCM2711_HZ	(54000000 / 22)

static void kbl_test_layout_bcm2711(struct kunit *test)
{
	struct kbl_layout l;

	KUNIT_ASSERT_EQ(test, kbl_layout_for_rate(BCM2711_HZ, 0, &l), 0);
	/* the old agent's scheme: 100 is a 0, 110 a 1, one byte a word */
	KUNIT_EXPECT_EQ(test, l.sub_bits, 3);
	KUNIT_EXPECT_EQ(test, l.high0, 1);
	KUNIT_EXPECT_EQ(test, l.high1, 2);
	KUNIT_EXPECT_EQ(test, l.word_bits, 24);
	KUNIT_EXPECT_EQ(test, l.range, 24);
}

static void kbl_test_layout_rp1(struct kunit *test)
{
	struct kbl_layout l;

	/* 50 MHz, as Raspberry Pi OS sets RP1's PWM0 clock: two words a bit */
	KUNIT_ASSERT_EQ(test, kbl_layout_for_rate(50000000, 1, &l), 0);
	KUNIT_EXPECT_EQ(test, l.sub_bits, 64);
	KUNIT_EXPECT_EQ(test, l.high0, 20);
	KUNIT_EXPECT_EQ(test, l.high1, 40);
	KUNIT_EXPECT_EQ(test, l.word_bits, 32);
	/* RANGE + 1 ticks a word on RP1 */
	KUNIT_EXPECT_EQ(test, l.range, 31);

	/* 2.4 MHz: a byte a word; the range needs no correction there */
	KUNIT_ASSERT_EQ(test, kbl_layout_for_rate(2400000, 1, &l), 0);
	KUNIT_EXPECT_EQ(test, l.word_bits, 24);
	KUNIT_EXPECT_EQ(test, l.range, 24);

	/* 4 MHz: 5 sub-bits, six whole bits a word */
	KUNIT_ASSERT_EQ(test, kbl_layout_for_rate(4000000, 1, &l), 0);
	KUNIT_EXPECT_EQ(test, l.sub_bits, 5);
	KUNIT_EXPECT_EQ(test, l.word_bits, 30);
}

static void kbl_test_timing_constants(struct kunit *test)
{
	static const unsigned long bad[] = { 0, 1000000, 1500000, 2000000000UL };
	struct kbl_layout l;
	unsigned int i;

	KUNIT_ASSERT_EQ(test, kbl_layout_for_rate(BCM2711_HZ, 0, &l), 0);
	/* 407 ns sub-bits: T0H 407, T1H 815, bit 1222 ns, all in tolerance */
	KUNIT_EXPECT_EQ(test, kbl_sub_bits_ns(BCM2711_HZ, l.high0), 407);
	KUNIT_EXPECT_EQ(test, kbl_sub_bits_ns(BCM2711_HZ, l.high1), 815);
	KUNIT_EXPECT_EQ(test, kbl_sub_bits_ns(BCM2711_HZ, l.sub_bits), 1222);
	KUNIT_EXPECT_GE(test, KBL_RESET_US, 280);

	for (i = 0; i < ARRAY_SIZE(bad); i++)
		KUNIT_EXPECT_EQ_MSG(test, kbl_layout_for_rate(bad[i], 0, &l), -ERANGE,
				    "%lu Hz accepted", bad[i]);
}

static void kbl_test_byte_order(struct kunit *test)
{
	static const u8 rgb[KBL_NUM_LEDS][3] = { { 1, 2, 3 }, { 4, 5, 6 } };
	static const u8 want_rgb[] = { 1, 2, 3, 4, 5, 6 };
	static const u8 want_grb[] = { 2, 1, 3, 5, 4, 6 };
	u8 out[KBL_FRAME_BYTES];

	kbl_frame_bytes(rgb, KBL_ORDER_RGB, out);
	KUNIT_EXPECT_MEMEQ(test, out, want_rgb, sizeof(out));
	kbl_frame_bytes(rgb, KBL_ORDER_GRB, out);
	KUNIT_EXPECT_MEMEQ(test, out, want_grb, sizeof(out));
}

/* top #ff8000, edge #0010fe, as the Go register backend's test */
static void kbl_test_encode_bcm2711(struct kunit *test)
{
	static const u8 rgb[KBL_NUM_LEDS][3] = { { 0xff, 0x80, 0 }, { 0, 0x10, 0xfe } };
	static const u32 want[] = {
		0xdb6db600, 0xd2492400, 0x92492400,
		0x92492400, 0x92692400, 0xdb6db400,
		0,
	};
	struct kbl_frame *f = kunit_kzalloc(test, sizeof(*f), GFP_KERNEL);
	u8 bytes[KBL_FRAME_BYTES];
	struct kbl_layout l;

	KUNIT_ASSERT_NOT_NULL(test, f);
	KUNIT_ASSERT_EQ(test, kbl_layout_for_rate(BCM2711_HZ, 0, &l), 0);
	kbl_frame_bytes(rgb, KBL_ORDER_RGB, bytes);
	KUNIT_ASSERT_EQ(test, kbl_encode(&l, bytes, sizeof(bytes), 1, f), 0);
	KUNIT_EXPECT_EQ(test, f->n_words, ARRAY_SIZE(want));
	KUNIT_EXPECT_EQ(test, f->range, 24);
	KUNIT_EXPECT_MEMEQ(test, f->words, want, sizeof(want));
}

static void kbl_test_encode_rp1(struct kunit *test)
{
	struct kbl_frame *f = kunit_kzalloc(test, sizeof(*f), GFP_KERNEL);
	static const u8 data[KBL_FRAME_BYTES] = { 0x80 };
	struct kbl_layout l;
	unsigned int i;

	KUNIT_ASSERT_NOT_NULL(test, f);
	KUNIT_ASSERT_EQ(test, kbl_layout_for_rate(50000000, 1, &l), 0);
	KUNIT_ASSERT_EQ(test, kbl_encode(&l, data, sizeof(data), 2, f), 0);
	/* 6 bytes of 8 bits of 2 words, and 2 low words */
	KUNIT_EXPECT_EQ(test, f->n_words, 98);
	KUNIT_EXPECT_EQ(test, f->words[0], 0xffffffff);	/* a 1: 40 high */
	KUNIT_EXPECT_EQ(test, f->words[1], 0xff000000);
	for (i = 1; i < 48; i++) {			/* 0s: 20 high */
		KUNIT_EXPECT_EQ(test, f->words[2 * i], 0xfffff000);
		KUNIT_EXPECT_EQ(test, f->words[2 * i + 1], 0);
	}
	KUNIT_EXPECT_EQ(test, f->words[96], 0);
	KUNIT_EXPECT_EQ(test, f->words[97], 0);
}

static void kbl_test_frame_limits(struct kunit *test)
{
	struct kbl_frame *f = kunit_kzalloc(test, sizeof(*f), GFP_KERNEL);
	u8 data[KBL_FRAME_BYTES + 1] = { };
	struct kbl_layout l;

	KUNIT_ASSERT_NOT_NULL(test, f);
	KUNIT_ASSERT_EQ(test, kbl_layout_for_rate(50000000, 1, &l), 0);
	/* the largest frame fits, one more byte or too many low words do not */
	KUNIT_EXPECT_EQ(test, kbl_encode(&l, data, KBL_FRAME_BYTES,
					 KBL_MAX_WORDS - 96, f), 0);
	KUNIT_EXPECT_EQ(test, kbl_encode(&l, data, KBL_FRAME_BYTES,
					 KBL_MAX_WORDS - 95, f), -E2BIG);
	KUNIT_EXPECT_EQ(test, kbl_encode(&l, data, sizeof(data), 0, f), -E2BIG);
}

static void kbl_test_fan_ticks(struct kunit *test)
{
	/* 25 kHz: 98 ticks at 2.45 MHz (25.05 kHz), 2000 at 50 MHz */
	KUNIT_EXPECT_EQ(test, kbl_ns_to_ticks(KBL_FAN_PERIOD_NS, BCM2711_HZ), 98);
	KUNIT_EXPECT_EQ(test, kbl_ns_to_ticks(KBL_FAN_PERIOD_NS, 50000000), 2000);
	/* rounded down, as the PWM framework expects of ->apply() */
	KUNIT_EXPECT_EQ(test, kbl_ns_to_ticks(20000, BCM2711_HZ), 49);
	KUNIT_EXPECT_EQ(test, kbl_ns_to_ticks(0, BCM2711_HZ), 0);
	KUNIT_EXPECT_EQ(test, kbl_ns_to_ticks(U64_MAX, 50000000), U32_MAX);
	/* reading back never gives less than was set */
	KUNIT_EXPECT_GE(test, kbl_ticks_to_ns(98, BCM2711_HZ), 39926ULL);
	KUNIT_EXPECT_EQ(test, kbl_ns_to_ticks(kbl_ticks_to_ns(98, BCM2711_HZ), BCM2711_HZ), 98);
}

/*
 * The LED class scales each channel's intensity by brightness /
 * max_brightness; the agent writes brightness = max_brightness, so what it
 * asks for is what the LEDs get.
 */
static void kbl_test_brightness_scaling(struct kunit *test)
{
	struct mc_subled sub[3] = {
		{ .color_index = LED_COLOR_ID_RED, .intensity = 255 },
		{ .color_index = LED_COLOR_ID_GREEN, .intensity = 128 },
		{ .color_index = LED_COLOR_ID_BLUE, .intensity = 1 },
	};
	struct led_classdev_mc mc = {
		.led_cdev = { .max_brightness = 255 },
		.num_colors = 3,
		.subled_info = sub,
	};

	KUNIT_ASSERT_EQ(test, led_mc_calc_color_components(&mc, 255), 0);
	KUNIT_EXPECT_EQ(test, sub[0].brightness, 255);
	KUNIT_EXPECT_EQ(test, sub[1].brightness, 128);
	KUNIT_EXPECT_EQ(test, sub[2].brightness, 1);
	/* half brightness, rounded to the nearest: 128 * 1 / 255 is 1 */
	KUNIT_ASSERT_EQ(test, led_mc_calc_color_components(&mc, 128), 0);
	KUNIT_EXPECT_EQ(test, sub[0].brightness, 128);
	KUNIT_EXPECT_EQ(test, sub[1].brightness, 64);
	KUNIT_EXPECT_EQ(test, sub[2].brightness, 1);
}

static struct kunit_case kbl_test_cases[] = {
	KUNIT_CASE(kbl_test_layout_bcm2711),
	KUNIT_CASE(kbl_test_layout_rp1),
	KUNIT_CASE(kbl_test_timing_constants),
	KUNIT_CASE(kbl_test_byte_order),
	KUNIT_CASE(kbl_test_encode_bcm2711),
	KUNIT_CASE(kbl_test_encode_rp1),
	KUNIT_CASE(kbl_test_frame_limits),
	KUNIT_CASE(kbl_test_fan_ticks),
	KUNIT_CASE(kbl_test_brightness_scaling),
	{}
};

static struct kunit_suite kbl_test_suite = {
	.name = "kubeblade-leds",
	.test_cases = kbl_test_cases,
};

kunit_test_suite(kbl_test_suite);

MODULE_DESCRIPTION("KUnit tests for kubeblade-leds");
MODULE_LICENSE("GPL");

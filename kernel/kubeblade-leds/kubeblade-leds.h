/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kubeblade-leds: the two WS2812 LEDs and the fan PWM of a Compute Blade.
 *
 * The pure parts (serializer timing, bit stream, frame layout, fan ticks)
 * live in ws2812.c and are covered by KUnit; everything that touches
 * hardware sits behind struct kbl_ops.
 */
#ifndef KUBEBLADE_LEDS_H
#define KUBEBLADE_LEDS_H

#include <linux/types.h>

struct device;

#define KBL_NUM_LEDS		2
#define KBL_FRAME_BYTES		(KBL_NUM_LEDS * 3)

/* WS2812B bit timing (datasheet), in nanoseconds */
#define KBL_T0H_NS		400
#define KBL_T1H_NS		800
#define KBL_BIT_NS		1250
#define KBL_TOL_NS		150
#define KBL_BIT_TOL_NS		600
/* Low time that latches a frame on every variant (WS2812B-V5: 280 us) */
#define KBL_RESET_US		280

/*
 * A frame at the slowest serializer layout (64 sub-bits per bit, two
 * 32-bit words) is 6 * 8 * 2 = 96 words, plus trailing low words.
 */
#define KBL_MAX_WORDS		104

/* The fan PWM period the agent asks for: 25 kHz */
#define KBL_FAN_PERIOD_NS	40000

enum kbl_order {
	KBL_ORDER_RGB,		/* the Compute Blade's LEDs */
	KBL_ORDER_GRB,		/* a stock WS2812B */
};

/**
 * struct kbl_layout - how a serializer draws WS2812 bits
 * @sub_bits: serializer bits per WS2812 bit
 * @high0: high sub-bits of a 0
 * @high1: high sub-bits of a 1
 * @word_bits: bits of each FIFO word that are sent, MSB first
 * @range: value for the range register in serializer mode
 */
struct kbl_layout {
	unsigned int sub_bits;
	unsigned int high0;
	unsigned int high1;
	unsigned int word_bits;
	unsigned int range;
};

/**
 * struct kbl_frame - one frame of FIFO words
 * @words: the words, MSB-aligned
 * @n_words: how many are used
 * @range: range register value the words are meant for
 */
struct kbl_frame {
	u32 words[KBL_MAX_WORDS];
	unsigned int n_words;
	unsigned int range;
};

int kbl_layout_for_rate(unsigned long rate_hz, unsigned int range_extra_tick,
			struct kbl_layout *l);
void kbl_frame_bytes(const u8 rgb[KBL_NUM_LEDS][3], enum kbl_order order,
		     u8 out[KBL_FRAME_BYTES]);
int kbl_encode(const struct kbl_layout *l, const u8 *data, unsigned int len,
	       unsigned int trailing_words, struct kbl_frame *f);
u32 kbl_ns_to_ticks(u64 ns, unsigned long rate_hz);
u64 kbl_ticks_to_ns(u32 ticks, unsigned long rate_hz);

struct kbl_hw;

/**
 * struct kbl_ops - the hardware behind the driver
 * @name: backend name, for messages and debugfs
 * @init: find and claim the hardware; set @hw->rate_hz to the serializer
 *	clock actually running; set @hw->has_fan when the fan pin is ours
 * @send: shift one frame out on GPIO18 and wait until it has latched
 * @fan: set the fan channel: period and duty in clock ticks
 * @exit: leave the hardware safe (fan at full speed, GPIO18 off the PWM)
 */
struct kbl_ops {
	const char *name;
	int (*init)(struct kbl_hw *hw);
	int (*send)(struct kbl_hw *hw, const struct kbl_frame *f);
	int (*fan)(struct kbl_hw *hw, u32 period, u32 duty, bool enabled);
	void (*exit)(struct kbl_hw *hw);
};

/**
 * struct kbl_soc - one supported SoC (or its simulation)
 * @name: "bcm2711", "bcm2712", "sim-bcm2711", ...
 * @ops: its hardware operations
 * @rate_hz: serializer clock to ask for
 * @range_extra_tick: the range register counts one tick more than it says
 *	(RP1, "period = RANGE + 1")
 * @trailing_words: low words after the data
 * @shared_channel: the fan and the LEDs share one PWM channel, so the fan
 *	is restored after every frame (BCM2711 PWM0 channel 0, the
 *	datasheet's channel 1: RNG1/DAT1)
 */
struct kbl_soc {
	const char *name;
	const struct kbl_ops *ops;
	unsigned long rate_hz;
	unsigned int range_extra_tick;
	unsigned int trailing_words;
	bool shared_channel;
};

/**
 * struct kbl_hw - state shared by the core and the hardware operations
 * @dev: the platform device
 * @soc: what runs it
 * @rate_hz: serializer clock, set by @soc->ops->init
 * @has_fan: the fan pin is driven by this driver
 * @priv: the operations' own state
 */
struct kbl_hw {
	struct device *dev;
	const struct kbl_soc *soc;
	unsigned long rate_hz;
	bool has_fan;
	void *priv;
};

extern const struct kbl_ops kbl_bcm2711_ops;
extern const struct kbl_ops kbl_rp1_ops;
extern const struct kbl_ops kbl_sim_ops;

#endif /* KUBEBLADE_LEDS_H */

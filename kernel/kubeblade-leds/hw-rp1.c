// SPDX-License-Identifier: GPL-2.0
/*
 * kubeblade-leds: BCM2712 (Compute Module 5) hardware, on the RP1 I/O chip.
 *
 * RP1 PWM0 channel 2 (GPIO18, function a3) serializes the frames and
 * channel 0 (GPIO12, function a0) drives the fan. Register layout as in
 * the RP1 PWM driver Raspberry Pi submitted upstream (pwm-rp1: CHAN_CTRL,
 * RANGE, PHASE, DUTY at 0x14/0x18/0x1c/0x20 + 16 * channel, mode 4 = MSB
 * serializer, SET_UPDATE bit 31 of GLOBAL_CTRL) and Circle's RP1 PWM driver
 * (FIFO_CTRL 0x04 with LEVEL 4:0, FLUSH bit 5, FLUSH_DONE bit 6; DUTY_FIFO
 * 0x10; USEFIFO bit 5). PWM0 is found beside RP1's GPIO block, whose node
 * (raspberrypi,rp1-gpio) both Raspberry Pi's and the mainline devicetrees
 * have; its clock is the PWM node's, or RP1_CLK_PWM0 of the RP1 clock
 * controller. Each pin has its own CTRL register, so switching GPIO18's
 * function cannot race another pin's.
 */

#include <linux/clk.h>
#include <linux/delay.h>
#include <linux/device.h>
#include <linux/io.h>
#include <linux/iopoll.h>
#include <linux/irqflags.h>
#include <linux/ktime.h>
#include <linux/of.h>
#include <linux/of_address.h>
#include <linux/slab.h>

#include "kubeblade-leds.h"

#define RP1_GPIO_OFFSET		0xd0000	/* IO_BANK0 in RP1's peripheral map */
#define RP1_PWM0_OFFSET		0x98000
#define RP1_PWM0_SIZE		0x100
#define RP1_CLK_PWM0		17	/* dt-bindings/clock/raspberrypi,rp1-clocks.h */

#define GPIO_CTRL(pin)		((pin) * 8 + 4)
#define GPIO_FUNCSEL		GENMASK(4, 0)
#define FUNCSEL_PWM		0	/* a0 on GPIO12: PWM0 channel 0 */
#define FUNCSEL_LED		3	/* a3 on GPIO18: PWM0 channel 2 */
#define FUNCSEL_GPIO		5
#define FUNCSEL_NULL		0x1f
#define PIN_FAN			12
#define PIN_LED			18

#define PWM_GLOBAL		0x00
#define PWM_FIFO_CTRL		0x04
#define PWM_DUTY_FIFO		0x10
#define PWM_CHAN_CTRL(c)	(0x14 + 16 * (c))
#define PWM_RANGE(c)		(0x18 + 16 * (c))
#define PWM_PHASE(c)		(0x1c + 16 * (c))
#define PWM_DUTY(c)		(0x20 + 16 * (c))

#define GLOBAL_EN(c)		BIT(c)
#define GLOBAL_SET_UPDATE	BIT(31)
#define FIFO_LEVEL		GENMASK(4, 0)
#define FIFO_FLUSH		BIT(5)
#define FIFO_FLUSH_DONE		BIT(6)
#define CHAN_MODE_TE_MS		1
#define CHAN_MODE_SERIAL_MSB	4
#define CHAN_USEFIFO		BIT(5)
#define CHAN_FIFO_POP_MASK	BIT(8)

#define CHAN_FAN		0
#define CHAN_LED		2
/* the old agent's conservative view of the FIFO */
#define FIFO_FEED_LEVEL		8
#define FEED_TIMEOUT_US		2000

struct kbl_rp1 {
	void __iomem *pwm;
	void __iomem *gpio;
	struct clk *clk;
};

static void kbl_rp1_funcsel(struct kbl_rp1 *r, unsigned int pin, u32 f)
{
	u32 v = readl(r->gpio + GPIO_CTRL(pin));

	writel((v & ~GPIO_FUNCSEL) | f, r->gpio + GPIO_CTRL(pin));
}

static void kbl_rp1_update(struct kbl_rp1 *r, u32 global)
{
	writel(global | GLOBAL_SET_UPDATE, r->pwm + PWM_GLOBAL);
}

static u32 kbl_rp1_global(struct kbl_rp1 *r)
{
	return readl(r->pwm + PWM_GLOBAL) & ~GLOBAL_SET_UPDATE;
}

static void kbl_rp1_clk_put(void *data)
{
	clk_put(data);
}

static struct clk *kbl_rp1_clock(struct device_node *pwm_np)
{
	struct of_phandle_args args = { .args_count = 1, .args = { RP1_CLK_PWM0 } };
	struct clk *clk;

	if (pwm_np)
		return of_clk_get(pwm_np, 0);
	args.np = of_find_compatible_node(NULL, NULL, "raspberrypi,rp1-clocks");
	if (!args.np)
		return ERR_PTR(-ENODEV);
	clk = of_clk_get_from_provider(&args);
	of_node_put(args.np);
	return clk;
}

static int kbl_rp1_init(struct kbl_hw *hw)
{
	struct device *dev = hw->dev;
	struct device_node *np, *pwm_np = NULL;
	struct resource gpio, pwm;
	struct kbl_rp1 *r;
	u32 fan_fn;
	int ret;

	r = devm_kzalloc(dev, sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	hw->priv = r;

	np = of_find_compatible_node(NULL, NULL, "raspberrypi,rp1-gpio");
	ret = np ? of_address_to_resource(np, 0, &gpio) : -ENODEV;
	of_node_put(np);
	if (ret)
		return dev_err_probe(dev, ret, "no RP1 GPIO node: is the RP1 driver loaded?\n");
	/* the pin CTRL registers belong to pinctrl-rp1: map without claiming */
	r->gpio = devm_ioremap(dev, gpio.start, GPIO_CTRL(PIN_LED) + 4);
	if (!r->gpio)
		return -ENOMEM;

	pwm.start = gpio.start - RP1_GPIO_OFFSET + RP1_PWM0_OFFSET;
	for_each_compatible_node(np, NULL, "raspberrypi,rp1-pwm") {
		struct resource res;

		if (!of_address_to_resource(np, 0, &res) && res.start == pwm.start) {
			pwm_np = np;	/* the iterator's reference is ours */
			break;
		}
	}
	if (!devm_request_mem_region(dev, pwm.start, RP1_PWM0_SIZE, dev_name(dev))) {
		of_node_put(pwm_np);
		return dev_err_probe(dev, -EBUSY,
				     "RP1 PWM0 at %#llx is in use by another driver (a pwm overlay?)\n",
				     (unsigned long long)pwm.start);
	}
	r->pwm = devm_ioremap(dev, pwm.start, RP1_PWM0_SIZE);
	r->clk = kbl_rp1_clock(pwm_np);
	of_node_put(pwm_np);
	if (!r->pwm)
		return -ENOMEM;
	if (IS_ERR(r->clk))
		return dev_err_probe(dev, PTR_ERR(r->clk), "no RP1 PWM0 clock\n");
	ret = devm_add_action_or_reset(dev, kbl_rp1_clk_put, r->clk);
	if (ret)
		return ret;

	/* fewer, wider words than at the 50 MHz Raspberry Pi OS sets, if it can */
	ret = clk_set_rate(r->clk, hw->soc->rate_hz);
	if (ret)
		dev_info(dev, "PWM0 clock stays at %lu Hz: %d\n", clk_get_rate(r->clk), ret);
	ret = clk_prepare_enable(r->clk);
	if (ret)
		return dev_err_probe(dev, ret, "enabling the PWM0 clock\n");
	hw->rate_hz = clk_get_rate(r->clk);

	kbl_rp1_update(r, kbl_rp1_global(r) & ~GLOBAL_EN(CHAN_LED));
	/*
	 * GPIO12 on another function than the PWM, GPIO or none is a UART for
	 * the smart fan unit: then the fan is not ours.
	 */
	fan_fn = readl(r->gpio + GPIO_CTRL(PIN_FAN)) & GPIO_FUNCSEL;
	hw->has_fan = fan_fn == FUNCSEL_PWM || fan_fn == FUNCSEL_GPIO || fan_fn == FUNCSEL_NULL;
	if (!hw->has_fan)
		dev_info(dev, "GPIO12 is on function %u (smart fan unit UART?): no fan PWM\n",
			 fan_fn);
	return 0;
}

/*
 * Feed the FIFO with interrupts off: a frame is at most ~100 words of 0.5 to
 * 10 us each, and an empty FIFO in the middle of it would corrupt a bit.
 * One level read (slow, it crosses PCIe) buys room for several pushes.
 */
static int kbl_rp1_feed(struct kbl_rp1 *r, const struct kbl_frame *f, u32 global)
{
	unsigned int i = 0, level;
	unsigned long flags;
	ktime_t deadline;
	int ret = 0;

	local_irq_save(flags);
	for (; i < f->n_words && i < FIFO_FEED_LEVEL; i++)
		writel(f->words[i], r->pwm + PWM_DUTY_FIFO);
	kbl_rp1_update(r, global | GLOBAL_EN(CHAN_LED));
	deadline = ktime_add_us(ktime_get(), FEED_TIMEOUT_US);
	while (i < f->n_words && !ret) {
		level = readl(r->pwm + PWM_FIFO_CTRL) & FIFO_LEVEL;
		for (; level < FIFO_FEED_LEVEL && i < f->n_words; level++)
			writel(f->words[i++], r->pwm + PWM_DUTY_FIFO);
		if (ktime_after(ktime_get(), deadline))
			ret = -ETIMEDOUT;
	}
	while (!ret && (readl(r->pwm + PWM_FIFO_CTRL) & FIFO_LEVEL))
		if (ktime_after(ktime_get(), deadline))
			ret = -ETIMEDOUT;
	local_irq_restore(flags);
	return ret;
}

static int kbl_rp1_send(struct kbl_hw *hw, const struct kbl_frame *f)
{
	struct kbl_rp1 *r = hw->priv;
	u32 global = kbl_rp1_global(r) & ~GLOBAL_EN(CHAN_LED);
	u32 v;
	int ret;

	kbl_rp1_update(r, global);
	writel(CHAN_FIFO_POP_MASK | CHAN_USEFIFO | CHAN_MODE_SERIAL_MSB,
	       r->pwm + PWM_CHAN_CTRL(CHAN_LED));
	writel(f->range, r->pwm + PWM_RANGE(CHAN_LED));
	writel(0, r->pwm + PWM_PHASE(CHAN_LED));
	writel(readl(r->pwm + PWM_FIFO_CTRL) | FIFO_FLUSH, r->pwm + PWM_FIFO_CTRL);
	ret = readl_poll_timeout(r->pwm + PWM_FIFO_CTRL, v, v & FIFO_FLUSH_DONE, 1, 1000);
	writel(readl(r->pwm + PWM_FIFO_CTRL) & ~FIFO_FLUSH, r->pwm + PWM_FIFO_CTRL);
	if (ret)
		return ret;
	kbl_rp1_update(r, global);
	/* a disabled channel drives its pin low: the reset time before the frame */
	kbl_rp1_funcsel(r, PIN_LED, FUNCSEL_LED);
	usleep_range(KBL_RESET_US, KBL_RESET_US + 50);
	ret = kbl_rp1_feed(r, f, global);
	if (!ret)
		usleep_range(KBL_RESET_US + 20, KBL_RESET_US + 100);
	kbl_rp1_update(r, kbl_rp1_global(r) & ~GLOBAL_EN(CHAN_LED));
	kbl_rp1_funcsel(r, PIN_LED, FUNCSEL_NULL);
	return ret;
}

static int kbl_rp1_fan(struct kbl_hw *hw, u32 period, u32 duty, bool enabled)
{
	struct kbl_rp1 *r = hw->priv;
	u32 global = kbl_rp1_global(r);

	if (!enabled) {
		kbl_rp1_update(r, global & ~GLOBAL_EN(CHAN_FAN));
		return 0;
	}
	writel(CHAN_FIFO_POP_MASK | CHAN_MODE_TE_MS, r->pwm + PWM_CHAN_CTRL(CHAN_FAN));
	/* the counter runs from 0 to RANGE: one tick more than it holds */
	writel(period - 1, r->pwm + PWM_RANGE(CHAN_FAN));
	writel(0, r->pwm + PWM_PHASE(CHAN_FAN));
	writel(duty, r->pwm + PWM_DUTY(CHAN_FAN));
	kbl_rp1_update(r, global | GLOBAL_EN(CHAN_FAN));
	kbl_rp1_funcsel(r, PIN_FAN, FUNCSEL_PWM);
	return 0;
}

static void kbl_rp1_exit(struct kbl_hw *hw)
{
	struct kbl_rp1 *r = hw->priv;

	kbl_rp1_update(r, kbl_rp1_global(r) & ~GLOBAL_EN(CHAN_LED));
	kbl_rp1_funcsel(r, PIN_LED, FUNCSEL_NULL);
	/* with the fan ours, its clock keeps running so full speed outlives us */
	if (!hw->has_fan)
		clk_disable_unprepare(r->clk);
}

const struct kbl_ops kbl_rp1_ops = {
	.name = "bcm2712",
	.init = kbl_rp1_init,
	.send = kbl_rp1_send,
	.fan = kbl_rp1_fan,
	.exit = kbl_rp1_exit,
};

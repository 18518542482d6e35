// SPDX-License-Identifier: GPL-2.0
/*
 * kubeblade-leds: BCM2711 (Compute Module 4) hardware.
 *
 * PWM0 channel 0 (Linux's numbering, the pin function PWM0_0;
 * the datasheet's PWM chapter calls it channel 1, hence PWEN1, RNG1, DAT1
 * and FIF1 below) drives the fan on GPIO12 (ALT0) in mark-space mode and,
 * for each frame, the LEDs on GPIO18 (ALT5) in serializer mode. GPIO18 is
 * on the PWM only while a frame is sent, so the fan's PWM never reaches
 * the LEDs. Registers: BCM2711 ARM Peripherals, PWM chapter; the PWM0 node
 * (brcm,bcm2835-pwm at 0x7e20c000) and its clock come from the SoC's own
 * devicetree, which has the node even when it is disabled, and the pin
 * functions are switched through the pinctrl-bcm2835 driver with a mapping
 * table registered at run time, so no overlay is needed.
 */

#include <linux/clk.h>
#include <linux/delay.h>
#include <linux/device.h>
#include <linux/io.h>
#include <linux/iopoll.h>
#include <linux/of.h>
#include <linux/of_address.h>
#include <linux/of_platform.h>
#include <linux/pinctrl/consumer.h>
#include <linux/pinctrl/machine.h>
#include <linux/pinctrl/pinconf-generic.h>
#include <linux/platform_device.h>
#include <linux/slab.h>

#include "kubeblade-leds.h"

#define PWM_CTL			0x00
#define PWM_STA			0x04
#define PWM_RNG1		0x10
#define PWM_DAT1		0x14
#define PWM_FIF1		0x18

#define CTL_PWEN1		BIT(0)
#define CTL_MODE1		BIT(1)	/* serializer */
#define CTL_RPTL1		BIT(2)	/* repeat the last word when empty */
#define CTL_USEF1		BIT(5)
#define CTL_CLRF1		BIT(6)
#define CTL_MSEN1		BIT(7)	/* mark-space */

#define STA_FULL1		BIT(0)
#define STA_EMPT1		BIT(1)
#define STA_WERR1		BIT(2)
#define STA_BERR		BIT(8)

/* PWM0 in the SoC's address map, as any translation of it ends */
#define BCM2711_PWM0_OFFSET	0x20c000
/*
 * The PWM block sits in another clock domain; the old compute-blade-agent
 * pauses 10 us after each control change, as some writes are otherwise
 * lost (BERR).
 */
#define BCM2711_PAUSE_US	10

struct kbl_bcm2711 {
	void __iomem *pwm;
	struct clk *clk;
	struct pinctrl *pctl;
	struct pinctrl_state *frame;
	struct pinctrl_state *idle;
	struct pinctrl_map *maps;
};

static unsigned long kbl_pull_down[] = {
	PIN_CONF_PACKED(PIN_CONFIG_BIAS_PULL_DOWN, 0),
};

static struct device_node *kbl_bcm2711_pwm0_node(struct resource *res)
{
	struct device_node *np;

	for_each_compatible_node(np, NULL, "brcm,bcm2835-pwm") {
		if (!of_address_to_resource(np, 0, res) &&
		    (res->start & 0xffffff) == BCM2711_PWM0_OFFSET)
			return np;	/* the iterator's reference is ours */
	}
	return NULL;
}

static void kbl_bcm2711_unmap(void *data)
{
	pinctrl_unregister_mappings(data);
}

static void kbl_bcm2711_clk_put(void *data)
{
	clk_put(data);
}

/*
 * Four pin states: the frame and idle states with and without GPIO12. When
 * GPIO12 is muxed to something else (UART5 for the smart fan unit), the
 * states with it cannot be selected, and the fan is not ours.
 */
static int kbl_bcm2711_pins(struct kbl_hw *hw, struct kbl_bcm2711 *b)
{
	struct device *dev = hw->dev;
	const char *me = dev_name(dev);
	struct platform_device *gpio;
	struct device_node *np;
	struct pinctrl_map *m;
	const char *ctl;
	int ret;

	np = of_find_compatible_node(NULL, NULL, "brcm,bcm2711-gpio");
	gpio = np ? of_find_device_by_node(np) : NULL;
	of_node_put(np);
	if (!gpio)
		return dev_err_probe(dev, -ENODEV, "no BCM2711 GPIO controller\n");
	ctl = devm_kstrdup(dev, dev_name(&gpio->dev), GFP_KERNEL);
	put_device(&gpio->dev);
	if (!ctl)
		return -ENOMEM;

	m = devm_kcalloc(dev, 8, sizeof(*m), GFP_KERNEL);
	if (!m)
		return -ENOMEM;
	m[0] = (struct pinctrl_map)PIN_MAP_MUX_GROUP(me, "frame-fan", ctl, "gpio12", "alt0");
	m[1] = (struct pinctrl_map)PIN_MAP_MUX_GROUP(me, "frame-fan", ctl, "gpio18", "alt5");
	m[2] = (struct pinctrl_map)PIN_MAP_MUX_GROUP(me, "idle-fan", ctl, "gpio12", "alt0");
	m[3] = (struct pinctrl_map)PIN_MAP_MUX_GROUP(me, "idle-fan", ctl, "gpio18", "gpio_in");
	m[4] = (struct pinctrl_map)PIN_MAP_CONFIGS_PIN(me, "idle-fan", ctl, "gpio18",
						       kbl_pull_down);
	m[5] = (struct pinctrl_map)PIN_MAP_MUX_GROUP(me, "frame", ctl, "gpio18", "alt5");
	m[6] = (struct pinctrl_map)PIN_MAP_MUX_GROUP(me, "idle", ctl, "gpio18", "gpio_in");
	m[7] = (struct pinctrl_map)PIN_MAP_CONFIGS_PIN(me, "idle", ctl, "gpio18", kbl_pull_down);
	ret = pinctrl_register_mappings(m, 8);
	if (ret)
		return ret;
	b->maps = m;
	ret = devm_add_action_or_reset(dev, kbl_bcm2711_unmap, m);
	if (ret)
		return ret;

	b->pctl = devm_pinctrl_get(dev);
	if (IS_ERR(b->pctl))
		return dev_err_probe(dev, PTR_ERR(b->pctl), "pinctrl\n");
	b->idle = pinctrl_lookup_state(b->pctl, "idle-fan");
	b->frame = pinctrl_lookup_state(b->pctl, "frame-fan");
	if (!IS_ERR(b->idle) && !IS_ERR(b->frame) &&
	    !pinctrl_select_state(b->pctl, b->idle)) {
		hw->has_fan = true;
		return 0;
	}
	dev_info(dev, "GPIO12 is in use by another function (smart fan unit UART?): no fan PWM\n");
	b->idle = pinctrl_lookup_state(b->pctl, "idle");
	b->frame = pinctrl_lookup_state(b->pctl, "frame");
	if (IS_ERR(b->idle) || IS_ERR(b->frame))
		return -ENODEV;
	return pinctrl_select_state(b->pctl, b->idle);
}

static int kbl_bcm2711_init(struct kbl_hw *hw)
{
	struct device *dev = hw->dev;
	struct kbl_bcm2711 *b;
	struct device_node *np;
	struct resource res;
	int ret;

	b = devm_kzalloc(dev, sizeof(*b), GFP_KERNEL);
	if (!b)
		return -ENOMEM;
	hw->priv = b;

	np = kbl_bcm2711_pwm0_node(&res);
	if (!np)
		return dev_err_probe(dev, -ENODEV, "no PWM0 node in the devicetree\n");
	if (!devm_request_mem_region(dev, res.start, resource_size(&res), dev_name(dev))) {
		of_node_put(np);
		return dev_err_probe(dev, -EBUSY,
				     "PWM0 %pR is in use by another driver: remove dtoverlay=pwm, this driver drives the fan itself\n",
				     &res);
	}
	b->pwm = devm_ioremap(dev, res.start, resource_size(&res));
	b->clk = of_clk_get(np, 0);
	of_node_put(np);
	if (!b->pwm)
		return -ENOMEM;
	if (IS_ERR(b->clk))
		return dev_err_probe(dev, PTR_ERR(b->clk), "no PWM clock\n");
	ret = devm_add_action_or_reset(dev, kbl_bcm2711_clk_put, b->clk);
	if (ret)
		return ret;

	writel(0, b->pwm + PWM_CTL);
	/* PWM1 (audio on boards with a jack) shares this clock; a CM4 blade has none */
	ret = clk_set_rate(b->clk, hw->soc->rate_hz);
	if (ret)
		dev_warn(dev, "setting the PWM clock to %lu Hz: %d\n", hw->soc->rate_hz, ret);
	ret = clk_prepare_enable(b->clk);
	if (ret)
		return dev_err_probe(dev, ret, "enabling the PWM clock\n");
	hw->rate_hz = clk_get_rate(b->clk);

	ret = kbl_bcm2711_pins(hw, b);
	if (ret)
		clk_disable_unprepare(b->clk);
	return ret;
}

static int kbl_bcm2711_send(struct kbl_hw *hw, const struct kbl_frame *f)
{
	struct kbl_bcm2711 *b = hw->priv;
	bool started = false;
	unsigned int i;
	int ret = 0;
	u32 sta;

	writel(0, b->pwm + PWM_CTL);
	udelay(BCM2711_PAUSE_US);
	writel(CTL_CLRF1, b->pwm + PWM_CTL);
	udelay(BCM2711_PAUSE_US);
	writel(f->range, b->pwm + PWM_RNG1);
	udelay(BCM2711_PAUSE_US);
	/* the stopped channel outputs low, so muxing GPIO18 now sends nothing */
	ret = pinctrl_select_state(b->pctl, b->frame);
	if (ret)
		return ret;

	for (i = 0; i < f->n_words; i++) {
		if (readl(b->pwm + PWM_STA) & STA_FULL1) {
			if (!started) {
				writel(CTL_PWEN1 | CTL_MODE1 | CTL_RPTL1 | CTL_USEF1,
				       b->pwm + PWM_CTL);
				started = true;
			}
			ret = readl_poll_timeout_atomic(b->pwm + PWM_STA, sta,
							!(sta & STA_FULL1), 1, 1000);
			if (ret)
				goto out;
		}
		writel(f->words[i], b->pwm + PWM_FIF1);
	}
	if (!started)
		writel(CTL_PWEN1 | CTL_MODE1 | CTL_RPTL1 | CTL_USEF1, b->pwm + PWM_CTL);
	ret = readl_poll_timeout(b->pwm + PWM_STA, sta, sta & STA_EMPT1, 5, 2000);
	if (ret)
		goto out;
	/* the last word is still shifting out; then the repeated low word latches */
	usleep_range(KBL_RESET_US + 20, KBL_RESET_US + 100);
	sta = readl(b->pwm + PWM_STA);
	if (sta & (STA_WERR1 | STA_BERR)) {
		writel(sta & (STA_WERR1 | STA_BERR), b->pwm + PWM_STA);
		ret = -EIO;
	}
out:
	pinctrl_select_state(b->pctl, b->idle);
	writel(0, b->pwm + PWM_CTL);
	udelay(BCM2711_PAUSE_US);
	return ret;
}

static int kbl_bcm2711_fan(struct kbl_hw *hw, u32 period, u32 duty, bool enabled)
{
	struct kbl_bcm2711 *b = hw->priv;

	writel(0, b->pwm + PWM_CTL);
	udelay(BCM2711_PAUSE_US);
	if (!enabled)
		return 0;
	writel(period, b->pwm + PWM_RNG1);
	writel(duty, b->pwm + PWM_DAT1);
	udelay(BCM2711_PAUSE_US);
	writel(CTL_MSEN1 | CTL_PWEN1, b->pwm + PWM_CTL);
	return 0;
}

static void kbl_bcm2711_exit(struct kbl_hw *hw)
{
	struct kbl_bcm2711 *b = hw->priv;

	pinctrl_select_state(b->pctl, b->idle);
	/* with the fan ours, its clock keeps running so full speed outlives us */
	if (!hw->has_fan)
		clk_disable_unprepare(b->clk);
}

const struct kbl_ops kbl_bcm2711_ops = {
	.name = "bcm2711",
	.init = kbl_bcm2711_init,
	.send = kbl_bcm2711_send,
	.fan = kbl_bcm2711_fan,
	.exit = kbl_bcm2711_exit,
};

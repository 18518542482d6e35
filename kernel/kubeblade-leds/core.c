// SPDX-License-Identifier: GPL-2.0
/*
 * kubeblade-leds: the two WS2812 LEDs of a Compute Blade as multicolor LED
 * class devices, and its fan PWM as a PWM chip.
 *
 * The LEDs hang off GPIO18. On a CM4 (BCM2711) that pin's PWM function is
 * PWM0 channel 0 (Linux's numbering, the pin function PWM0_0;
 * the datasheet's PWM chapter calls it channel 1: PWEN1, RNG1, DAT1), the
 * very channel the fan on GPIO12 uses, so this driver owns both: it
 * serializes each frame through the channel and gives the fan its duty
 * back afterwards, and it exposes the fan as a pwm_chip for the agent's
 * sysfs PWM path. On a CM5 (BCM2712) the LEDs use RP1 PWM0 channel
 * 2 and the fan channel 0, which is exposed the same way (mainline and
 * Talos have no RP1 PWM driver). The hardware is found from the SoC's
 * compatible string, so no devicetree overlay is needed.
 *
 * Experimental: this driver has not been seen working on a blade yet.
 */

#include <linux/err.h>
#include <linux/led-class-multicolor.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/of.h>
#include <linux/platform_device.h>
#include <linux/pwm.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "kubeblade-leds.h"

#define KBL_DRIVER_NAME		"kubeblade-leds"

static char *backend = "auto";
module_param(backend, charp, 0444);
MODULE_PARM_DESC(backend,
		 "auto (from the SoC), bcm2711, bcm2712, or sim-bcm2711 / sim-bcm2712 (simulated hardware for tests)");

static char *prefix = "kubeblade";
module_param(prefix, charp, 0444);
MODULE_PARM_DESC(prefix, "LED name prefix: <prefix>:rgb:top and <prefix>:rgb:edge");

static char *order = "rgb";
module_param(order, charp, 0444);
MODULE_PARM_DESC(order, "byte order the LEDs read: rgb (Compute Blade) or grb");

/*
 * BCM2711: the PWM clock from the 54 MHz oscillator divided by 22 gives
 * 407 ns sub-bits, three to a WS2812 bit. RP1: 2.4 MHz is asked for, and
 * whatever the clock gives is checked against WS2812 timing; the simulated
 * RP1 runs at 50 MHz, the rate Raspberry Pi OS sets, so both layouts run.
 */
static const struct kbl_soc kbl_socs[] = {
	{ .name = "bcm2711", .ops = &kbl_bcm2711_ops, .rate_hz = 54000000 / 22,
	  .trailing_words = 1, .shared_channel = true },
	{ .name = "bcm2712", .ops = &kbl_rp1_ops, .rate_hz = 2400000,
	  .range_extra_tick = 1, .trailing_words = 2 },
	{ .name = "sim-bcm2711", .ops = &kbl_sim_ops, .rate_hz = 54000000 / 22,
	  .trailing_words = 1, .shared_channel = true },
	{ .name = "sim-bcm2712", .ops = &kbl_sim_ops, .rate_hz = 50000000,
	  .range_extra_tick = 1, .trailing_words = 2 },
};

struct kbl_priv;

struct kbl_led {
	struct led_classdev_mc mc;
	struct mc_subled sub[3];
	struct kbl_priv *priv;
	unsigned int index;
};

struct kbl_priv {
	struct kbl_hw hw;
	/* serialises frames and fan changes: they share the hardware */
	struct mutex lock;
	struct kbl_layout layout;
	enum kbl_order order;
	struct kbl_led leds[KBL_NUM_LEDS];
	u8 rgb[KBL_NUM_LEDS][3];
	struct kbl_frame frame;
	u32 fan_period;
	u32 fan_duty;
	bool fan_enabled;
#ifndef KBL_PWMCHIP_ALLOC
	struct pwm_chip chip;
#endif
};

static int kbl_send_locked(struct kbl_priv *priv)
{
	const struct kbl_soc *soc = priv->hw.soc;
	u8 bytes[KBL_FRAME_BYTES];
	int ret, err;

	kbl_frame_bytes(priv->rgb, priv->order, bytes);
	ret = kbl_encode(&priv->layout, bytes, sizeof(bytes), soc->trailing_words,
			 &priv->frame);
	if (!ret)
		ret = soc->ops->send(&priv->hw, &priv->frame);
	if (soc->shared_channel && priv->hw.has_fan) {
		/* whatever happened to the frame, the fan gets its duty back */
		err = soc->ops->fan(&priv->hw, priv->fan_period, priv->fan_duty,
				    priv->fan_enabled);
		if (!ret)
			ret = err;
	}
	if (ret)
		dev_err_ratelimited(priv->hw.dev, "sending a frame failed: %d\n", ret);
	return ret;
}

static int kbl_led_set(struct led_classdev *cdev, enum led_brightness brightness)
{
	struct led_classdev_mc *mc = lcdev_to_mccdev(cdev);
	struct kbl_led *led = container_of(mc, struct kbl_led, mc);
	struct kbl_priv *priv = led->priv;
	unsigned int i;
	int ret;

	ret = led_mc_calc_color_components(mc, brightness);
	if (ret)
		return ret;
	mutex_lock(&priv->lock);
	for (i = 0; i < ARRAY_SIZE(led->sub); i++)
		priv->rgb[led->index][i] = led->sub[i].brightness;
	ret = kbl_send_locked(priv);
	mutex_unlock(&priv->lock);
	return ret;
}

static int kbl_register_led(struct kbl_priv *priv, unsigned int index,
			    const char *function)
{
	static const unsigned int colors[] = {
		LED_COLOR_ID_RED, LED_COLOR_ID_GREEN, LED_COLOR_ID_BLUE,
	};
	struct device *dev = priv->hw.dev;
	struct kbl_led *led = &priv->leds[index];
	struct led_classdev *cdev = &led->mc.led_cdev;
	unsigned int i;

	led->priv = priv;
	led->index = index;
	for (i = 0; i < ARRAY_SIZE(led->sub); i++) {
		led->sub[i].color_index = colors[i];
		led->sub[i].channel = i;
	}
	led->mc.subled_info = led->sub;
	led->mc.num_colors = ARRAY_SIZE(led->sub);
	cdev->name = devm_kasprintf(dev, GFP_KERNEL, "%s:rgb:%s", prefix, function);
	if (!cdev->name)
		return -ENOMEM;
	cdev->max_brightness = 255;
	cdev->brightness_set_blocking = kbl_led_set;
	return devm_led_classdev_multicolor_register_ext(dev, &led->mc, NULL);
}

static struct kbl_priv *kbl_chip_priv(struct pwm_chip *chip)
{
#ifdef KBL_PWMCHIP_ALLOC
	return pwmchip_get_drvdata(chip);
#else
	return container_of(chip, struct kbl_priv, chip);
#endif
}

static int kbl_pwm_apply(struct pwm_chip *chip, struct pwm_device *pwm,
			 const struct pwm_state *state)
{
	struct kbl_priv *priv = kbl_chip_priv(chip);
	unsigned long rate = priv->hw.rate_hz;
	u32 period, duty;
	int ret;

	if (state->polarity != PWM_POLARITY_NORMAL)
		return -EINVAL;
	/* rounded down, as the PWM framework expects */
	period = kbl_ns_to_ticks(state->period, rate);
	duty = min(kbl_ns_to_ticks(state->duty_cycle, rate), period);
	if (state->enabled && period < 2)
		return -EINVAL;

	mutex_lock(&priv->lock);
	ret = priv->hw.soc->ops->fan(&priv->hw, period, duty, state->enabled);
	if (!ret) {
		priv->fan_period = period;
		priv->fan_duty = duty;
		priv->fan_enabled = state->enabled;
	}
	mutex_unlock(&priv->lock);
	return ret;
}

static int kbl_pwm_get_state(struct pwm_chip *chip, struct pwm_device *pwm,
			     struct pwm_state *state)
{
	struct kbl_priv *priv = kbl_chip_priv(chip);

	mutex_lock(&priv->lock);
	state->period = kbl_ticks_to_ns(priv->fan_period, priv->hw.rate_hz);
	state->duty_cycle = kbl_ticks_to_ns(priv->fan_duty, priv->hw.rate_hz);
	state->enabled = priv->fan_enabled;
	state->polarity = PWM_POLARITY_NORMAL;
	mutex_unlock(&priv->lock);
	return 0;
}

static const struct pwm_ops kbl_pwm_ops = {
	.apply = kbl_pwm_apply,
	.get_state = kbl_pwm_get_state,
#ifndef KBL_PWMCHIP_ALLOC
	.owner = THIS_MODULE,
#endif
};

static int kbl_register_fan(struct kbl_priv *priv)
{
	struct device *dev = priv->hw.dev;
	struct pwm_chip *chip;

#ifdef KBL_PWMCHIP_ALLOC
	chip = devm_pwmchip_alloc(dev, 1, 0);
	if (IS_ERR(chip))
		return PTR_ERR(chip);
	pwmchip_set_drvdata(chip, priv);
#else
	chip = &priv->chip;
	chip->dev = dev;
	chip->npwm = 1;
	chip->base = -1;
#endif
	chip->ops = &kbl_pwm_ops;
	return devm_pwmchip_add(dev, chip);
}

static void kbl_hw_exit(void *data)
{
	struct kbl_priv *priv = data;
	const struct kbl_ops *ops = priv->hw.soc->ops;

	mutex_lock(&priv->lock);
	/* leave the blade safe: fan at full speed, like the agent's exit */
	if (priv->hw.has_fan && priv->fan_period)
		ops->fan(&priv->hw, priv->fan_period, priv->fan_period, true);
	ops->exit(&priv->hw);
	mutex_unlock(&priv->lock);
}

static int kbl_probe(struct platform_device *pdev)
{
	struct device *dev = &pdev->dev;
	const struct kbl_soc *const *socp = dev_get_platdata(dev);
	const struct kbl_soc *soc = *socp;
	struct kbl_layout *l;
	struct kbl_priv *priv;
	int ret;

	priv = devm_kzalloc(dev, sizeof(*priv), GFP_KERNEL);
	if (!priv)
		return -ENOMEM;
	mutex_init(&priv->lock);
	priv->hw.dev = dev;
	priv->hw.soc = soc;
	priv->order = strcmp(order, "grb") ? KBL_ORDER_RGB : KBL_ORDER_GRB;

	ret = soc->ops->init(&priv->hw);
	if (ret)
		return dev_err_probe(dev, ret, "%s: hardware not available\n", soc->name);
	ret = devm_add_action_or_reset(dev, kbl_hw_exit, priv);
	if (ret)
		return ret;

	l = &priv->layout;
	ret = kbl_layout_for_rate(priv->hw.rate_hz, soc->range_extra_tick, l);
	if (ret)
		return dev_err_probe(dev, ret,
				     "serializer clock %lu Hz cannot meet WS2812 timing\n",
				     priv->hw.rate_hz);

	if (priv->hw.has_fan) {
		/* full speed until the agent says otherwise */
		priv->fan_period = kbl_ns_to_ticks(KBL_FAN_PERIOD_NS, priv->hw.rate_hz);
		priv->fan_duty = priv->fan_period;
		priv->fan_enabled = true;
		mutex_lock(&priv->lock);
		ret = soc->ops->fan(&priv->hw, priv->fan_period, priv->fan_duty, true);
		mutex_unlock(&priv->lock);
		if (!ret)
			ret = kbl_register_fan(priv);
		if (ret)
			return dev_err_probe(dev, ret, "fan PWM\n");
	}

	ret = kbl_register_led(priv, 0, "top");
	if (!ret)
		ret = kbl_register_led(priv, 1, "edge");
	if (ret)
		return dev_err_probe(dev, ret, "registering the LEDs\n");

	/* a known state: the LEDs may show anything after power-up */
	mutex_lock(&priv->lock);
	ret = kbl_send_locked(priv);
	mutex_unlock(&priv->lock);
	if (ret)
		return dev_err_probe(dev, ret, "first frame\n");

	dev_info(dev,
		 "%s: LEDs %s:rgb:top and %s:rgb:edge, fan PWM %s; serializer %lu Hz, %u sub-bits a bit, %u-bit words (experimental)\n",
		 soc->name, prefix, prefix, priv->hw.has_fan ? "yes" : "no",
		 priv->hw.rate_hz, l->sub_bits, l->word_bits);
	return 0;
}

static struct platform_driver kbl_driver = {
	.driver = {
		.name = KBL_DRIVER_NAME,
	},
};

static struct platform_device *kbl_pdev;

static const struct kbl_soc *kbl_pick_soc(void)
{
	unsigned int i;

	if (!strcmp(backend, "auto")) {
		if (of_machine_is_compatible("raspberrypi,4-compute-module") &&
		    of_machine_is_compatible("brcm,bcm2711"))
			return &kbl_socs[0];
		if (of_machine_is_compatible("raspberrypi,5-compute-module") &&
		    of_machine_is_compatible("brcm,bcm2712"))
			return &kbl_socs[1];
		pr_err(KBL_DRIVER_NAME ": not a Compute Module 4 or 5; backend=bcm2711 or bcm2712 forces one, backend=sim-bcm2711 simulates one\n");
		return ERR_PTR(-ENODEV);
	}
	for (i = 0; i < ARRAY_SIZE(kbl_socs); i++)
		if (!strcmp(backend, kbl_socs[i].name))
			return &kbl_socs[i];
	pr_err(KBL_DRIVER_NAME ": unknown backend \"%s\"\n", backend);
	return ERR_PTR(-EINVAL);
}

static int __init kbl_init(void)
{
	const struct kbl_soc *soc = kbl_pick_soc();

	if (IS_ERR(soc))
		return PTR_ERR(soc);
	if (strcmp(order, "rgb") && strcmp(order, "grb")) {
		pr_err(KBL_DRIVER_NAME ": order must be rgb or grb, not \"%s\"\n", order);
		return -EINVAL;
	}
	/* probes at once: a failed probe fails the module load, with its reason */
	kbl_pdev = platform_create_bundle(&kbl_driver, kbl_probe, NULL, 0,
					  &soc, sizeof(soc));
	return PTR_ERR_OR_ZERO(kbl_pdev);
}
module_init(kbl_init);

static void __exit kbl_exit(void)
{
	platform_device_unregister(kbl_pdev);
	platform_driver_unregister(&kbl_driver);
}
module_exit(kbl_exit);

MODULE_DESCRIPTION("Compute Blade WS2812 LEDs (multicolor LED class) and fan PWM (experimental)");
MODULE_AUTHOR("The kubeblade authors");
MODULE_LICENSE("GPL");
MODULE_ALIAS("platform:" KBL_DRIVER_NAME);

// SPDX-License-Identifier: GPL-2.0
/*
 * kubeblade-leds: simulated hardware (backend=sim-bcm2711 or sim-bcm2712).
 *
 * Nothing is driven; every frame and fan setting the operations receive is
 * kept, the last KBL_SIM_EVENTS of them, and listed in debugfs at
 * <debugfs>/kubeblade-leds/events, one a line:
 *
 *   frame <seq> rate=<Hz> range=<bits> words=<n> <word> <word> ...
 *   fan <seq> period=<ticks> duty=<ticks> enabled=<0|1>
 *
 * Writing anything to the file empties it. Tests decode the frames the way
 * the LEDs would and compare the colours with what they asked for.
 */

#include <linux/debugfs.h>
#include <linux/device.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>
#include <linux/slab.h>

#include "kubeblade-leds.h"

#define KBL_SIM_EVENTS	64

struct kbl_sim_event {
	u32 seq;
	bool is_frame;
	struct kbl_frame frame;
	u32 period;
	u32 duty;
	bool enabled;
};

struct kbl_sim {
	struct kbl_hw *hw;
	struct dentry *dir;
	/* the log is read from debugfs while the core adds to it */
	struct mutex lock;
	struct kbl_sim_event *events;
	unsigned int head;
	unsigned int count;
	u32 seq;
};

static struct kbl_sim_event *kbl_sim_next(struct kbl_sim *sim)
{
	struct kbl_sim_event *e = &sim->events[(sim->head + sim->count) % KBL_SIM_EVENTS];

	if (sim->count < KBL_SIM_EVENTS)
		sim->count++;
	else
		sim->head = (sim->head + 1) % KBL_SIM_EVENTS;
	memset(e, 0, sizeof(*e));
	e->seq = ++sim->seq;
	return e;
}

static int kbl_sim_show(struct seq_file *s, void *unused)
{
	struct kbl_sim *sim = s->private;
	unsigned int i, j;

	mutex_lock(&sim->lock);
	for (i = 0; i < sim->count; i++) {
		const struct kbl_sim_event *e = &sim->events[(sim->head + i) % KBL_SIM_EVENTS];

		if (!e->is_frame) {
			seq_printf(s, "fan %u period=%u duty=%u enabled=%d\n",
				   e->seq, e->period, e->duty, e->enabled);
			continue;
		}
		seq_printf(s, "frame %u rate=%lu range=%u words=%u", e->seq,
			   sim->hw->rate_hz, e->frame.range, e->frame.n_words);
		for (j = 0; j < e->frame.n_words; j++)
			seq_printf(s, " %08x", e->frame.words[j]);
		seq_putc(s, '\n');
	}
	mutex_unlock(&sim->lock);
	return 0;
}

static int kbl_sim_open(struct inode *inode, struct file *file)
{
	return single_open(file, kbl_sim_show, inode->i_private);
}

static ssize_t kbl_sim_clear(struct file *file, const char __user *buf,
			     size_t len, loff_t *ppos)
{
	struct kbl_sim *sim = ((struct seq_file *)file->private_data)->private;

	mutex_lock(&sim->lock);
	sim->head = 0;
	sim->count = 0;
	mutex_unlock(&sim->lock);
	return len;
}

static const struct file_operations kbl_sim_fops = {
	.owner = THIS_MODULE,
	.open = kbl_sim_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.write = kbl_sim_clear,
	.release = single_release,
};

static void kbl_sim_remove(void *data)
{
	struct kbl_sim *sim = data;

	debugfs_remove_recursive(sim->dir);
}

static int kbl_sim_init(struct kbl_hw *hw)
{
	struct kbl_sim *sim;

	sim = devm_kzalloc(hw->dev, sizeof(*sim), GFP_KERNEL);
	if (!sim)
		return -ENOMEM;
	sim->events = devm_kcalloc(hw->dev, KBL_SIM_EVENTS, sizeof(*sim->events),
				   GFP_KERNEL);
	if (!sim->events)
		return -ENOMEM;
	mutex_init(&sim->lock);
	sim->hw = hw;
	hw->priv = sim;
	hw->rate_hz = hw->soc->rate_hz;
	hw->has_fan = true;
	sim->dir = debugfs_create_dir(dev_name(hw->dev), NULL);
	debugfs_create_file("events", 0600, sim->dir, sim, &kbl_sim_fops);
	return devm_add_action_or_reset(hw->dev, kbl_sim_remove, sim);
}

static int kbl_sim_send(struct kbl_hw *hw, const struct kbl_frame *f)
{
	struct kbl_sim *sim = hw->priv;
	struct kbl_sim_event *e;

	mutex_lock(&sim->lock);
	e = kbl_sim_next(sim);
	e->is_frame = true;
	e->frame = *f;
	mutex_unlock(&sim->lock);
	return 0;
}

static int kbl_sim_fan(struct kbl_hw *hw, u32 period, u32 duty, bool enabled)
{
	struct kbl_sim *sim = hw->priv;
	struct kbl_sim_event *e;

	mutex_lock(&sim->lock);
	e = kbl_sim_next(sim);
	e->period = period;
	e->duty = duty;
	e->enabled = enabled;
	mutex_unlock(&sim->lock);
	return 0;
}

static void kbl_sim_exit(struct kbl_hw *hw)
{
	dev_info(hw->dev, "simulated hardware released\n");
}

const struct kbl_ops kbl_sim_ops = {
	.name = "sim",
	.init = kbl_sim_init,
	.send = kbl_sim_send,
	.fan = kbl_sim_fan,
	.exit = kbl_sim_exit,
};

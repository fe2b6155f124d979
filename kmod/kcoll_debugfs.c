// SPDX-License-Identifier: GPL-2.0
/*
 * kcoll debugfs (root only): /sys/kernel/debug/kcoll/ holds comms (every
 * communicator's operations and connections, for diagnosing a stuck
 * operation; kcollctl reports the same through netlink), quota (per-user
 * usage) and reduce_bench (the CPU reductions' speed against memcpy).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/seq_file.h>

#include "kcoll_types.h"
#include "kcoll_comm.h"
#include "kcoll_mem.h"
#include "kcoll_gmr.h"
#include "kcoll_debugfs.h"
#include "kcoll_quota.h"
#include "kcoll_reduce.h"
#include "kcoll_local.h"

/*
 * debugfs kcoll/comms: the state of every communicator, its operations and
 * connections, for diagnosing a stuck operation (until kcollctl reports it).
 */
static int kcoll_comm_show(struct kcoll_comm *comm, void *arg)
{
	struct seq_file *m = arg;
	struct kcoll_task *op;
	u32 i;

	{
		mutex_lock(&comm->lock);
		seq_printf(m, "comm %llx rank %u/%u error %d ops %u next_seq %u up %u model %u/%u/%u\n",
			   comm->uid, comm->rank, comm->nranks, comm->error,
			   comm->nr_ops, comm->coll_seq, comm->nr_up,
			   comm->model.alpha_ns,
			   comm->model.beta_ps, comm->model.gamma_ps);
		list_for_each_entry(op, &comm->ops, all)
			seq_printf(m, "  op %s algo %s prio %u%s seq %u kind %u started %d phase %u/%u err %d fin %d sigs %u%s send %llu/%llu/%llu recv %llu/%llu/%llu ahead send %llu/%llu recv %llu/%llu writes %u grants %u gmrs %u%s%s\n",
				   kcoll_op_name(op->args.opcode),
				   kcoll_algo_name(kcoll_sched_algo(&op->args)),
				   op->prio, op->held ? " (held)" : "",
				   op->seq,
				   op->kind, op->started, op->phase,
				   op->nphases, op->error, op->finished,
				   op->sigs_ok,
				   op->lazy ? (op->lazy_sent ? " (lazy, asked)" :
					       " (lazy)") : "",
				   op->send_posted, op->send_done,
				   op->send_total, op->recv_granted,
				   op->recv_done, op->recv_total,
				   op->ahead_posted, op->ahead_sent,
				   op->ahead_granted, op->ahead_done,
				   op->writes_inflight, op->grants_out, op->gmrs,
				   op->returned ? " returned" : "",
				   op->tok_want ? " token-waits" : "");
		list_for_each_entry(op, &comm->ops, all) {
			static const char * const names[KCOLL_SBUF_NR] = {
				[KCOLL_SBUF_SEND] = "send",
				[KCOLL_SBUF_RECV] = "recv",
				[KCOLL_SBUF_TMP] = "tmp",
			};
			int b;

			seq_printf(m, "  op %u mrs\n", op->seq);
			for (b = 0; b < KCOLL_SBUF_NR; b++)
				kcoll_buf_show(m, names[b], &op->bufs[b]);
		}
		{
			struct kcoll_mem *mem;

			list_for_each_entry(mem, &comm->mems, node) {
				seq_printf(m, "  mem %u len %llu\n",
					   mem->handle, mem->len);
				kcoll_buf_show(m, "mem", &mem->buf);
			}
		}
		for (i = 0; i < comm->nranks; i++) {
			struct kcoll_conn *c = comm->conns[i];
			struct kcoll_grant *g;
			struct kcoll_sig *s;
			int k;

			if (!c)
				continue;
			seq_printf(m, "  conn %u state %d %s qps %u sq %u slots %lx",
				   i, c->state, c->local ? "local" : "rdma",
				   c->nlanes, c->sq_posted, c->slot_busy);
			if (c->local)
				seq_printf(m, " copied %llu", c->local_bytes);
			if (c->ping_min_ns)
				seq_printf(m, " rtt %llu ns", c->ping_min_ns);
			if (c->eager) {
				int e;

				/* Our slots: full ones by seq.phase (p seq:
				 * point-to-point); the peer's we may write
				 * and those our point-to-point holds;
				 * credits owed. */
				seq_puts(m, " eager rx:");
				for (e = 0; e < KCOLL_EAGER_SLOTS; e++)
					if (c->erx[e].full &&
					    c->erx[e].kind == KCOLL_KIND_P2P)
						seq_printf(m, " p%u",
							   c->erx[e].seq);
					else if (c->erx[e].full)
						seq_printf(m, " %u.%u",
							   c->erx[e].seq,
							   c->erx[e].phase);
				seq_printf(m, " tx free %lx p2p %lx young %lx due %lx",
					   c->etx_free, c->etx_p2p,
					   c->etx_young, c->erx_due);
				seq_printf(m, " p2p %d/%d",
					   c->p2p_offer, c->peer_p2p);
				/* Lazy signatures: ours offered, the
				 * peer's; its asks not answered yet. */
				seq_printf(m, " lazy %d/%d",
					   c->lazy_offer, c->peer_lazy);
				/* Tokens that cover: offered both ways,
				 * one of ours on the wire. */
				seq_printf(m, " cover %d/%d%s",
					   c->cover_offer, c->peer_cover,
					   c->tok_busy ? " tok-busy" : "");
				for (e = 0; e < c->nasks; e++)
					seq_printf(m, " asked %u",
						   c->asks[e]);
			}
			for (k = 0; k < KCOLL_KIND_NR; k++) {
				seq_printf(m, " k%d out %u (ser %u/%u) in:", k,
					   c->k[k].nr_out, c->k[k].serial_out,
					   c->k[k].serial_in);
				list_for_each_entry(g, &c->k[k].in, node)
					seq_printf(m, " %u.%u", g->seq, g->phase);
			}
			seq_puts(m, " sigs:");
			list_for_each_entry(s, &c->sigs, node)
				seq_printf(m, " %u/%u", s->seq, s->msg.type);
			seq_printf(m, " gmrs %u\n", c->gmr_nr);
			kcoll_gmr_show(m, c);
		}
		mutex_unlock(&comm->lock);
	}
	return 0;
}

static int kcoll_comms_show(struct seq_file *m, void *unused)
{
	return kcoll_comms_for_each(kcoll_comm_show, m, 0);
}
DEFINE_SHOW_ATTRIBUTE(kcoll_comms);

static struct dentry *kcoll_debugfs;

void kcoll_debugfs_init(void)
{
	kcoll_debugfs = debugfs_create_dir("kcoll", NULL);
	debugfs_create_file("comms", 0400, kcoll_debugfs, NULL,
			    &kcoll_comms_fops);
	kcoll_quota_debugfs_init(kcoll_debugfs);
	kcoll_reduce_debugfs_init(kcoll_debugfs);
	kcoll_local_debugfs_init(kcoll_debugfs);
}

void kcoll_debugfs_exit(void)
{
	debugfs_remove_recursive(kcoll_debugfs);
}

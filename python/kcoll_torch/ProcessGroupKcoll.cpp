// SPDX-License-Identifier: MIT
/*
 * kcoll_torch: a torch.distributed process group backed by libcoll, built
 * against the torch 1.13 C++ API Debian ships (c10d::ProcessGroup).
 *
 * Every call issues libcoll non-blocking operations (coll_i*) from the
 * caller's thread and returns a WorkKcoll at once. One completion thread
 * per process group sleeps in coll_wait() on the oldest request (in the
 * kernel: no spinning), finishes each Work in issue order (copies results
 * back into tensors that were not contiguous, marks the Work and its
 * Future completed, or failed with kcoll's report), then the next.
 * Work::wait() sleeps on the Work's condition variable; isCompleted()
 * only looks at a flag.
 *
 * Tensors: CPU, dense, one per call (torch's multi-device lists are not
 * kcoll's model); a tensor that is not contiguous is copied into a
 * contiguous one and back after completion. Anything kcoll cannot do (a
 * dtype it has no type for, a bitwise reduction, uneven alltoall splits, receives from any source, CUDA tensors with a torch
 * built without CUDA) raises an error naming the call; nothing falls back
 * to another backend.
 */
#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <pybind11/chrono.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

extern "C" {
#include <coll.h>
}

namespace kcoll_torch {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

/* The error text of a failed libcoll call: errno name and what libcoll
 * said about it. */
static std::string coll_err(const char *what, int err)
{
	std::ostringstream s;

	s << "kcoll: " << what << ": " << coll_strerror(err) << " ("
	  << coll_last_error() << ")";
	return s.str();
}

class WorkKcoll : public c10d::Work {
public:
	WorkKcoll(OpType type, const char *name, std::vector<at::Tensor> outputs)
		: c10d::Work(-1, type), name_(name), outputs_(std::move(outputs)),
		  future_(c10::make_intrusive<c10::ivalue::Future>(
			  c10::ListType::create(c10::TensorType::get())))
	{
	}

	std::vector<at::Tensor> result() override
	{
		return outputs_;
	}

	c10::intrusive_ptr<c10::ivalue::Future> getFuture() override
	{
		return future_;
	}

	/* Called by the completion thread only. */
	void complete(coll_comm *comm)
	{
		int err = 0;

		/* Freed here, not by the destructor: a Work the caller
		 * keeps may outlive the process group and its comm, which
		 * frees every request left on it. */
		for (auto *r : reqs_) {
			int e = coll_wait(r);

			if (e && !err)
				err = e;
			coll_request_free(r);
		}
		reqs_.clear();
		/* Issued in part: what was issued ran, the rest never did,
		 * so nothing may be copied out as if it had. */
		if (!err)
			err = issue_err_;
		if (err) {
			coll_report rep;
			char line[512] = "";
			std::ostringstream s;

			if (!coll_comm_get_report(comm, &rep) && rep.error)
				coll_report_format(&rep, line, sizeof(line));
			s << "kcoll: " << name_ << " failed: "
			  << coll_strerror(err);
			if (line[0])
				s << ": " << line;
			else
				s << " (" << coll_last_error() << ")";
			auto ex = std::make_exception_ptr(
				std::runtime_error(s.str()));
			finish(ex);
			future_->setError(ex);
			return;
		}
		try {
			if (after_)
				after_();
		} catch (...) {
			auto ex = std::current_exception();

			finish(ex);
			future_->setError(ex);
			return;
		}
		finish();
		future_->markCompleted(c10::IValue(outputs_));
	}

	std::string name_;
	std::vector<at::Tensor> outputs_;
	/* What must stay alive until the operation completed. */
	std::vector<at::Tensor> keep_;
	/* Freed by complete(), which every queued Work reaches before its
	 * group's comm goes (run() drains the queue); never by a
	 * destructor, which may run after the comm freed them. */
	std::vector<coll_request *> reqs_;
	/* The error that stopped issue_n() after some requests, or 0. */
	int issue_err_ = 0;
	/* Copies back into the caller's tensors, after success. */
	std::function<void()> after_;
	c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupKcoll : public c10d::ProcessGroup {
public:
	ProcessGroupKcoll(const c10::intrusive_ptr<c10d::Store> &store,
			  int rank, int size, std::chrono::milliseconds timeout)
		: c10d::ProcessGroup(rank, size)
	{
		coll_unique_id id;
		char hex[COLL_UNIQUE_ID_STRLEN];
		int err;

		/* Rank 0 serves the bootstrap; its id reaches the others
		 * through the c10d store (a PrefixStore per group). */
		if (rank == 0) {
			err = coll_get_unique_id(&id);
			TORCH_CHECK(!err, coll_err("coll_get_unique_id", err));
			err = coll_unique_id_to_string(&id, hex, sizeof(hex));
			TORCH_CHECK(!err, coll_err("coll_unique_id_to_string", err));
			std::string s(hex);
			store->set("kcoll_unique_id",
				   std::vector<uint8_t>(s.begin(), s.end()));
		} else {
			auto v = store->get("kcoll_unique_id");
			std::string s(v.begin(), v.end());

			err = coll_unique_id_from_string(&id, s.c_str());
			TORCH_CHECK(!err, "kcoll: the store holds no valid unique id");
		}
		err = coll_comm_init_rank(&comm_, size, &id, rank);
		TORCH_CHECK(!err, coll_err("coll_comm_init_rank", err));
		start(timeout);
	}

	/*
	 * A group of some ranks of @parent (torch's new_group() over a kcoll
	 * world): made by its members alone from @parent's table and key
	 * (coll_comm_create_group()), no bootstrap. Through the group's
	 * store each member says which rank of @parent it is, and group
	 * rank 0 picks a random tag, so that every group torch makes is a
	 * communicator of its own.
	 */
	ProcessGroupKcoll(const c10::intrusive_ptr<c10d::Store> &store,
			  const ProcessGroupKcoll &parent, int rank, int size,
			  std::chrono::milliseconds timeout)
		: c10d::ProcessGroup(rank, size)
	{
		std::vector<int> ranks(size);
		uint64_t tag;
		int err;

		if (rank == 0) {
			std::random_device rd;

			tag = (uint64_t)rd() << 32 | rd();
			store->set("kcoll_group_tag", to_bytes(tag));
		} else {
			tag = from_bytes(store->get("kcoll_group_tag"));
		}
		store->set("kcoll_member_" + std::to_string(rank),
			   to_bytes((uint64_t)parent.getRank()));
		for (int i = 0; i < size; i++)
			ranks[i] = (int)from_bytes(
				store->get("kcoll_member_" + std::to_string(i)));
		TORCH_CHECK(ranks[rank] == parent.getRank(),
			    "kcoll: the store lists another rank as group rank ",
			    rank);
		err = coll_comm_create_group(parent.comm_, ranks.data(), size,
					     tag, &comm_);
		TORCH_CHECK(!err, coll_err("coll_comm_create_group", err));
		start(timeout);
	}

	/*
	 * A group over a communicator already made (kcoll_torch.shrink():
	 * coll_comm_shrink() by the survivors alone); it owns @comm from
	 * here on, also when this throws.
	 */
	ProcessGroupKcoll(coll_comm *comm, uint32_t timeout_ms)
		: c10d::ProcessGroup(coll_comm_rank(comm), coll_comm_size(comm)),
		  comm_(comm)
	{
		start_ms(timeout_ms);
	}

	/*
	 * kcoll_torch.shrink(): a new group of this group's ranks less
	 * @exclude (group ranks), made by the survivors alone: no store, no
	 * message on this group, which may be broken (coll_comm_shrink(),
	 * ncclCommShrink). With @abort this group is revoked first, so that
	 * what is still in flight on it fails everywhere; without, it must
	 * be idle. @timeout_ms < 0: this group's operation timeout.
	 */
	c10::intrusive_ptr<c10d::ProcessGroup>
	shrink(const std::vector<int> &exclude, bool abort,
	       int64_t timeout_ms) const
	{
		coll_comm *c = nullptr;
		int err;

		err = coll_comm_shrink(comm_, exclude.data(),
				       (int)exclude.size(),
				       abort ? COLL_SHRINK_ABORT : 0, &c);
		TORCH_CHECK(!err, coll_err("coll_comm_shrink", err));
		return c10::make_intrusive<ProcessGroupKcoll>(
			c, timeout_ms < 0 ? timeout_ms_ :
			timeout_to_ms(std::chrono::milliseconds(timeout_ms)));
	}

	/* kcoll_torch.revoke(): every operation in flight on this group, and
	 * every later one, fails at once here and on every rank that can be
	 * reached (coll_comm_revoke(), ncclCommRevoke). */
	void revoke() const
	{
		int err = coll_comm_revoke(comm_);

		TORCH_CHECK(!err, coll_err("coll_comm_revoke", err));
	}

	/* Why the last failed operation of this group failed
	 * (coll_comm_get_report()); r->error 0: none failed. */
	void last_report(coll_report *r) const
	{
		int err = coll_comm_get_report(comm_, r);

		TORCH_CHECK(!err, coll_err("coll_comm_get_report", err));
	}

	/* The communicator's id and its parent's (0: none), as kcollctl
	 * shows them. */
	std::pair<uint64_t, uint64_t> comm_ids() const
	{
		return { coll_comm_uid(comm_), coll_comm_parent_uid(comm_) };
	}

	~ProcessGroupKcoll() override
	{
		{
			std::unique_lock<std::mutex> l(mu_);
			stop_ = true;
			cv_.notify_all();
		}
		thread_.join();
		coll_comm_destroy(comm_);
	}

	const std::string getBackendName() const override
	{
		return "kcoll";
	}

	void setSequenceNumberForGroup() override
	{
	}

	uint64_t getSequenceNumberForGroup() override
	{
		return seq_;
	}

	WorkPtr broadcast(std::vector<at::Tensor> &tensors,
			  const c10d::BroadcastOptions &opts) override
	{
		auto t = one(tensors, "broadcast");
		check_root(opts.rootRank, "broadcast");
		auto work = make_work(OpType::BROADCAST, "broadcast", { t });
		auto buf = dense(work, t);
		return issue(work, opts.timeout, [&](coll_request **r) {
			return coll_ibroadcast(buf.data_ptr(), buf.data_ptr(),
					       buf.numel(), dtype(buf, "broadcast"),
					       (int)opts.rootRank, comm_, r);
		});
	}

	WorkPtr allreduce(std::vector<at::Tensor> &tensors,
			  const c10d::AllreduceOptions &opts) override
	{
		auto t = one(tensors, "allreduce");
		auto dt = dtype(t, "allreduce");
		auto op = redop(opts.reduceOp, dt, "allreduce");
		auto work = make_work(OpType::ALLREDUCE, "allreduce", { t });
		auto buf = dense(work, t);
		return issue(work, opts.timeout, [&](coll_request **r) {
			return coll_iallreduce(buf.data_ptr(), buf.data_ptr(),
					       buf.numel(), dt, op, comm_, r);
		});
	}

	/* DDP's buckets and torch's coalesced calls: tensors of one dtype
	 * are flattened into one buffer and reduced in one operation. */
	WorkPtr allreduce_coalesced(std::vector<at::Tensor> &tensors,
				    const c10d::AllreduceCoalescedOptions &opts) override
	{
		const char *name = "allreduce_coalesced";

		TORCH_CHECK(!tensors.empty(), "kcoll: ", name, ": no tensors");
		auto dt = dtype(tensors[0], name);
		auto op = redop(opts.reduceOp, dt, name);
		for (auto &t : tensors) {
			check_tensor(t, name);
			TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
				    "kcoll: ", name, ": the tensors must share one dtype");
		}
		auto work = make_work(OpType::ALLREDUCE_COALESCED, name, tensors);
		auto flat = torch::cat(flatten_all(tensors));
		work->keep_.push_back(flat);
		work->after_ = [flat, tensors]() mutable {
			int64_t off = 0;

			for (auto &t : tensors) {
				t.copy_(flat.narrow(0, off, t.numel()).view_as(t));
				off += t.numel();
			}
		};
		return issue(work, opts.timeout, [&](coll_request **r) {
			return coll_iallreduce(flat.data_ptr(), flat.data_ptr(),
					       flat.numel(), dt, op, comm_, r);
		});
	}

	WorkPtr reduce(std::vector<at::Tensor> &tensors,
		       const c10d::ReduceOptions &opts) override
	{
		auto t = one(tensors, "reduce");
		auto dt = dtype(t, "reduce");
		auto op = redop(opts.reduceOp, dt, "reduce");
		check_root(opts.rootRank, "reduce");
		auto work = make_work(OpType::REDUCE, "reduce", { t });
		auto buf = dense(work, t);
		return issue(work, opts.timeout, [&](coll_request **r) {
			return coll_ireduce(buf.data_ptr(), buf.data_ptr(),
					    buf.numel(), dt, op,
					    (int)opts.rootRank, comm_, r);
		});
	}

	WorkPtr allgather(std::vector<std::vector<at::Tensor>> &outputs,
			  std::vector<at::Tensor> &inputs,
			  const c10d::AllgatherOptions &opts) override
	{
		auto in = one(inputs, "allgather");
		TORCH_CHECK(outputs.size() == 1, "kcoll: allgather: one output list per process");
		auto &outs = outputs[0];
		check_list(outs, in, "allgather");
		auto work = make_work(OpType::ALLGATHER, "allgather", outs);
		auto src = in.contiguous();
		auto flat = torch::empty({ (int64_t)size_ * in.numel() },
					 in.options());
		work->keep_ = { src, flat };
		work->after_ = unflatten(flat, outs);
		return issue(work, opts.timeout, [&](coll_request **r) {
			return coll_iallgather(src.data_ptr(), flat.data_ptr(),
					       src.numel(), dtype(src, "allgather"),
					       comm_, r);
		});
	}

	WorkPtr _allgather_base(at::Tensor &output, at::Tensor &input,
				const c10d::AllgatherOptions &opts) override
	{
		const char *name = "_allgather_base";

		check_scaled(output, input, name, "output");
		auto work = make_work(OpType::_ALLGATHER_BASE, name, { output });
		auto src = input.contiguous();
		work->keep_.push_back(src);
		auto dst = dense(work, output);
		return issue(work, opts.timeout, [&](coll_request **r) {
			return coll_iallgather(src.data_ptr(), dst.data_ptr(),
					       src.numel(), dtype(src, name),
					       comm_, r);
		});
	}

	WorkPtr allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
				    std::vector<at::Tensor> &inputs,
				    const c10d::AllgatherOptions &opts) override
	{
		const char *name = "allgather_coalesced";

		TORCH_CHECK(outputs.size() == inputs.size() && !inputs.empty(),
			    "kcoll: ", name, ": one output list per input tensor");
		std::vector<at::Tensor> all;
		for (size_t k = 0; k < inputs.size(); k++) {
			check_tensor(inputs[k], name);
			check_list(outputs[k], inputs[k], name);
			all.insert(all.end(), outputs[k].begin(), outputs[k].end());
		}
		auto work = make_work(OpType::ALLGATHER_COALESCED, name, all);
		std::vector<at::Tensor> flats;
		for (size_t k = 0; k < inputs.size(); k++) {
			auto src = inputs[k].contiguous();
			auto flat = torch::empty({ (int64_t)size_ * src.numel() },
						 src.options());
			work->keep_.push_back(src);
			work->keep_.push_back(flat);
			flats.push_back(flat);
		}
		auto outs = outputs;
		work->after_ = [flats, outs]() mutable {
			for (size_t k = 0; k < outs.size(); k++) {
				auto n = outs[k][0].numel();

				for (size_t i = 0; i < outs[k].size(); i++)
					outs[k][i].copy_(flats[k].narrow(0, (int64_t)i * n, n)
								 .view_as(outs[k][i]));
			}
		};
		size_t k = 0;
		return issue_n(work, opts.timeout, inputs.size(), [&](coll_request **r) {
			auto &src = work->keep_[2 * k];
			auto &flat = work->keep_[2 * k + 1];

			k++;
			return coll_iallgather(src.data_ptr(), flat.data_ptr(),
					       src.numel(), dtype(src, name),
					       comm_, r);
		});
	}

	WorkPtr reduce_scatter(std::vector<at::Tensor> &outputs,
			       std::vector<std::vector<at::Tensor>> &inputs,
			       const c10d::ReduceScatterOptions &opts) override
	{
		const char *name = "reduce_scatter";
		auto out = one(outputs, name);
		TORCH_CHECK(inputs.size() == 1, "kcoll: ", name, ": one input list per process");
		check_list(inputs[0], out, name);
		auto dt = dtype(out, name);
		auto op = redop(opts.reduceOp, dt, name);
		auto work = make_work(OpType::REDUCE_SCATTER, name, { out });
		auto flat = torch::cat(flatten_all(inputs[0]));
		work->keep_.push_back(flat);
		auto dst = dense(work, out);
		return issue(work, opts.timeout, [&](coll_request **r) {
			return coll_ireduce_scatter(flat.data_ptr(), dst.data_ptr(),
						    dst.numel(), dt, op, comm_, r);
		});
	}

	WorkPtr _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
				     const c10d::ReduceScatterOptions &opts) override
	{
		const char *name = "_reduce_scatter_base";

		check_scaled(input, output, name, "input");
		auto dt = dtype(output, name);
		auto op = redop(opts.reduceOp, dt, name);
		auto work = make_work(OpType::_REDUCE_SCATTER_BASE, name, { output });
		auto src = input.contiguous();
		work->keep_.push_back(src);
		auto dst = dense(work, output);
		return issue(work, opts.timeout, [&](coll_request **r) {
			return coll_ireduce_scatter(src.data_ptr(), dst.data_ptr(),
						    dst.numel(), dt, op, comm_, r);
		});
	}

	WorkPtr alltoall_base(at::Tensor &output, at::Tensor &input,
			      std::vector<int64_t> &outSplits,
			      std::vector<int64_t> &inSplits,
			      const c10d::AllToAllOptions &opts) override
	{
		const char *name = "alltoall_base";

		check_tensor(input, name);
		check_tensor(output, name);
		TORCH_CHECK(output.scalar_type() == input.scalar_type(),
			    "kcoll: ", name, ": output and input must have the same dtype");
		TORCH_CHECK(input.dim() >= 1 && output.dim() >= 1, "kcoll: ", name,
			    ": a scalar cannot be split");
		if (!outSplits.empty() || !inSplits.empty())
			return alltoallv_base(output, input, outSplits, inSplits,
					      opts);
		TORCH_CHECK(output.numel() == input.numel(), "kcoll: ", name,
			    ": output and input must have the same size");
		TORCH_CHECK(input.size(0) % size_ == 0, "kcoll: ", name,
			    ": the first dimension must divide by world_size");
		auto work = make_work(OpType::ALLTOALL_BASE, name, { output });
		auto src = input.contiguous();
		work->keep_.push_back(src);
		auto dst = dense(work, output);
		return issue(work, opts.timeout, [&](coll_request **r) {
			return coll_ialltoall(src.data_ptr(), dst.data_ptr(),
					      src.numel() / size_, dtype(src, name),
					      comm_, r);
		});
	}

	/*
	 * all_to_all_single with split sizes (rows of the first dimension per
	 * rank; empty: even): what mixture-of-experts layers route tokens
	 * with. Through coll_ialltoallv, which copies the count arrays.
	 */
	WorkPtr alltoallv_base(at::Tensor &output, at::Tensor &input,
			       const std::vector<int64_t> &outSplits,
			       const std::vector<int64_t> &inSplits,
			       const c10d::AllToAllOptions &opts)
	{
		const char *name = "alltoall_base";
		/* Elements per row: the dimensions after the first. */
		int64_t row = c10::multiply_integers(input.sizes().slice(1));
		std::vector<size_t> sc, sd, rc, rd;

		TORCH_CHECK(input.sizes().slice(1) == output.sizes().slice(1),
			    "kcoll: ", name, ": input and output rows must have the same shape");
		splits_to_counts(inSplits, input.size(0), row, sc, sd, name);
		splits_to_counts(outSplits, output.size(0), row, rc, rd, name);
		auto work = make_work(OpType::ALLTOALL_BASE, name, { output });
		auto src = input.contiguous();
		work->keep_.push_back(src);
		auto dst = dense(work, output);
		return issue(work, opts.timeout, [&](coll_request **r) {
			return coll_ialltoallv(src.data_ptr(), sc.data(), sd.data(),
					       dst.data_ptr(), rc.data(), rd.data(),
					       dtype(src, name), comm_, r);
		});
	}

	WorkPtr alltoall(std::vector<at::Tensor> &outputs,
			 std::vector<at::Tensor> &inputs,
			 const c10d::AllToAllOptions &opts) override
	{
		const char *name = "alltoall";

		TORCH_CHECK((int)inputs.size() == size_ && (int)outputs.size() == size_,
			    "kcoll: ", name, ": world_size input and output tensors");
		for (int i = 0; i < size_; i++) {
			check_tensor(inputs[i], name);
			check_tensor(outputs[i], name);
			TORCH_CHECK(inputs[i].scalar_type() == inputs[0].scalar_type() &&
					    outputs[i].scalar_type() == inputs[0].scalar_type(),
				    "kcoll: ", name, ": the tensors must share one dtype");
		}
		auto work = make_work(OpType::ALLTOALL, name, outputs);
		auto src = torch::cat(flatten_all(inputs));
		int64_t total = 0;
		bool even = true;

		for (int i = 0; i < size_; i++) {
			total += outputs[i].numel();
			even = even && inputs[i].numel() == inputs[0].numel() &&
			       outputs[i].numel() == inputs[0].numel();
		}
		auto flat = torch::empty({ total }, src.options());
		work->keep_ = { src, flat };
		work->after_ = unflatten(flat, outputs);
		if (even)
			return issue(work, opts.timeout, [&](coll_request **r) {
				return coll_ialltoall(src.data_ptr(), flat.data_ptr(),
						      inputs[0].numel(),
						      dtype(src, name), comm_, r);
			});
		/* Tensors of different sizes: alltoallv, blocks packed. */
		std::vector<size_t> sc(size_), sd(size_), rc(size_), rd(size_);
		size_t s_at = 0, r_at = 0;

		for (int i = 0; i < size_; i++) {
			sc[i] = (size_t)inputs[i].numel();
			sd[i] = s_at;
			s_at += sc[i];
			rc[i] = (size_t)outputs[i].numel();
			rd[i] = r_at;
			r_at += rc[i];
		}
		return issue(work, opts.timeout, [&](coll_request **r) {
			return coll_ialltoallv(src.data_ptr(), sc.data(), sd.data(),
					       flat.data_ptr(), rc.data(), rd.data(),
					       dtype(src, name), comm_, r);
		});
	}

	/* Matched per peer in issue order: the tag is not looked at. */
	WorkPtr send(std::vector<at::Tensor> &tensors, int dst, int tag) override
	{
		(void)tag;
		auto t = one(tensors, "send");
		check_peer(dst, "send");
		auto work = make_work(OpType::SEND, "send", { t });
		auto src = t.contiguous();
		work->keep_.push_back(src);
		return issue(work, c10d::kUnsetTimeout, [&](coll_request **r) {
			return coll_isend(src.data_ptr(), src.numel(),
					  dtype(src, "send"), dst, comm_, r);
		});
	}

	WorkPtr recv(std::vector<at::Tensor> &tensors, int src, int tag) override
	{
		(void)tag;
		auto t = one(tensors, "recv");
		check_peer(src, "recv");
		auto work = make_work(OpType::RECV, "recv", { t });
		auto dst = dense(work, t);
		return issue(work, c10d::kUnsetTimeout, [&](coll_request **r) {
			return coll_irecv(dst.data_ptr(), dst.numel(),
					  dtype(dst, "recv"), src, comm_, r);
		});
	}

	WorkPtr recvAnysource(std::vector<at::Tensor> &, int) override
	{
		TORCH_CHECK(false, "kcoll: recv from any source: kcoll matches a receive to one named peer; name the source rank");
	}

	/* The root's list of world_size tensors comes in one list; the
	 * other ranks pass none (torch.distributed.gather/scatter). */
	bool root_list(size_t n, int root, const char *name)
	{
		TORCH_CHECK(root >= 0 && root < size_, "kcoll: ", name,
			    ": root ", root, " not in 0..", size_ - 1);
		if (rank_ == root) {
			TORCH_CHECK(n == 1, "kcoll: ", name,
				    ": the root passes one list of tensors");
		} else {
			TORCH_CHECK(n == 0, "kcoll: ", name,
				    ": only the root passes a list of tensors");
		}
		return rank_ == root;
	}

	WorkPtr gather(std::vector<std::vector<at::Tensor>> &outputs,
		       std::vector<at::Tensor> &inputs,
		       const c10d::GatherOptions &opts) override
	{
		const char *name = "gather";
		auto in = one(inputs, name);
		int root = (int)opts.rootRank;
		bool is_root = root_list(outputs.size(), root, name);
		std::vector<at::Tensor> none;
		auto &outs = is_root ? outputs[0] : none;

		if (is_root)
			check_list(outs, in, name);
		auto work = make_work(OpType::GATHER, name, outs);
		auto src = in.contiguous();
		at::Tensor flat;
		work->keep_ = { src };
		if (is_root) {
			flat = torch::empty({ (int64_t)size_ * in.numel() },
					    in.options());
			work->keep_.push_back(flat);
			work->after_ = unflatten(flat, outs);
		}
		return issue(work, opts.timeout, [&](coll_request **r) {
			return coll_igather(src.data_ptr(),
					    is_root ? flat.data_ptr() : nullptr,
					    src.numel(), dtype(src, name), root,
					    comm_, r);
		});
	}

	WorkPtr scatter(std::vector<at::Tensor> &outputs,
			std::vector<std::vector<at::Tensor>> &inputs,
			const c10d::ScatterOptions &opts) override
	{
		const char *name = "scatter";
		auto out = one(outputs, name);
		int root = (int)opts.rootRank;
		bool is_root = root_list(inputs.size(), root, name);
		at::Tensor flat;

		if (is_root)
			check_list(inputs[0], out, name);
		auto work = make_work(OpType::SCATTER, name, { out });
		if (is_root) {
			flat = torch::cat(flatten_all(inputs[0]));
			work->keep_.push_back(flat);
		}
		auto dst = dense(work, out);
		return issue(work, opts.timeout, [&](coll_request **r) {
			return coll_iscatter(is_root ? flat.data_ptr() : nullptr,
					     dst.data_ptr(), dst.numel(),
					     dtype(dst, name), root, comm_, r);
		});
	}

	WorkPtr barrier(const c10d::BarrierOptions &opts) override
	{
		auto work = make_work(OpType::BARRIER, "barrier", {});
		return issue(work, opts.timeout, [&](coll_request **r) {
			return coll_ibarrier(comm_, r);
		});
	}

private:
	/* After the communicator is made: its timeout, the completion
	 * thread. */
	void start(std::chrono::milliseconds timeout)
	{
		start_ms(timeout_to_ms(timeout));
	}

	void start_ms(uint32_t timeout_ms)
	{
		int err;

		timeout_ms_ = timeout_ms;
		err = coll_comm_set_timeout(comm_, timeout_ms_);
		if (err) {
			coll_comm_destroy(comm_);
			TORCH_CHECK(false, coll_err("coll_comm_set_timeout", err));
		}
		thread_ = std::thread([this] { run(); });
		init();
	}

	static std::vector<uint8_t> to_bytes(uint64_t v)
	{
		std::string s = std::to_string(v);

		return std::vector<uint8_t>(s.begin(), s.end());
	}

	static uint64_t from_bytes(const std::vector<uint8_t> &v)
	{
		std::string s(v.begin(), v.end());
		size_t end = 0;
		uint64_t x = 0;

		try {
			x = std::stoull(s, &end);
		} catch (const std::exception &) {
			end = 0;
		}
		TORCH_CHECK(end && end == s.size(),
			    "kcoll: the group's store holds no number where a member's rank or the tag should be");
		return x;
	}

	static uint32_t timeout_to_ms(std::chrono::milliseconds t)
	{
		auto ms = t.count();

		if (ms <= 0)
			return COLL_TIMEOUT_NONE;
		if (ms >= (int64_t)COLL_TIMEOUT_NONE)
			return COLL_TIMEOUT_NONE - 1;
		return (uint32_t)ms;
	}

	static void check_tensor(const at::Tensor &t, const char *name)
	{
		TORCH_CHECK(t.defined(), "kcoll: ", name, ": undefined tensor");
		TORCH_CHECK(t.device().is_cpu(), "kcoll: ", name, ": ",
			    t.device().str(),
			    " tensors are not supported by kcoll_torch (this build handles CPU tensors; "
			    "device memory goes through libcoll's coll_*_stream API)");
		TORCH_CHECK(t.layout() == at::kStrided, "kcoll: ", name,
			    ": only dense (strided) tensors");
	}

	static coll_dtype dtype(const at::Tensor &t, const char *name)
	{
		switch (t.scalar_type()) {
		case at::kChar: return COLL_DTYPE_INT8;
		case at::kByte: return COLL_DTYPE_UINT8;
		case at::kInt: return COLL_DTYPE_INT32;
		case at::kLong: return COLL_DTYPE_INT64;
		case at::kHalf: return COLL_DTYPE_FP16;
		case at::kBFloat16: return COLL_DTYPE_BF16;
		case at::kFloat: return COLL_DTYPE_FP32;
		case at::kDouble: return COLL_DTYPE_FP64;
		default:
			TORCH_CHECK(false, "kcoll: ", name, ": dtype ",
				    t.scalar_type(), " is not supported (int8, uint8, int32, int64, "
				    "float16, bfloat16, float32, float64 are)");
		}
	}

	static coll_redop redop(const c10d::ReduceOp &op, coll_dtype dt,
				const char *name)
	{
		coll_redop r;

		switch ((c10d::ReduceOp::RedOpType)op) {
		case c10d::ReduceOp::SUM: r = COLL_REDOP_SUM; break;
		case c10d::ReduceOp::PRODUCT: r = COLL_REDOP_PROD; break;
		case c10d::ReduceOp::MIN: r = COLL_REDOP_MIN; break;
		case c10d::ReduceOp::MAX: r = COLL_REDOP_MAX; break;
		case c10d::ReduceOp::AVG: r = COLL_REDOP_AVG; break;
		default:
			TORCH_CHECK(false, "kcoll: ", name,
				    ": ReduceOp ", (int)(c10d::ReduceOp::RedOpType)op,
				    " is not supported (SUM, PRODUCT, MIN, MAX and AVG are)");
		}
		TORCH_CHECK(coll_redop_valid(dt, r), "kcoll: ", name, ": ",
			    coll_redop_name(r), " is not defined on ",
			    coll_dtype_name(dt));
		return r;
	}

	at::Tensor one(std::vector<at::Tensor> &tensors, const char *name)
	{
		TORCH_CHECK(tensors.size() == 1, "kcoll: ", name,
			    ": one tensor per process (got ", tensors.size(), ")");
		check_tensor(tensors[0], name);
		(void)dtype(tensors[0], name);
		return tensors[0];
	}

	void check_list(const std::vector<at::Tensor> &list,
			const at::Tensor &like, const char *name)
	{
		TORCH_CHECK((int)list.size() == size_, "kcoll: ", name,
			    ": the list must hold world_size (", size_,
			    ") tensors, not ", list.size());
		for (auto &t : list) {
			check_tensor(t, name);
			TORCH_CHECK(t.scalar_type() == like.scalar_type() &&
					    t.numel() == like.numel(),
				    "kcoll: ", name, ": every tensor must match the input's dtype and size");
		}
	}

	/* @big (the call's @what) holds world_size times @small's
	 * elements, of the same dtype. */
	void check_scaled(const at::Tensor &big, const at::Tensor &small,
			  const char *name, const char *what)
	{
		check_tensor(big, name);
		check_tensor(small, name);
		TORCH_CHECK(big.scalar_type() == small.scalar_type(), "kcoll: ",
			    name, ": output and input dtypes differ");
		TORCH_CHECK(big.numel() == (int64_t)size_ * small.numel(),
			    "kcoll: ", name, ": the ", what,
			    " must hold world_size times the other's elements");
	}

	void check_root(int64_t root, const char *name)
	{
		TORCH_CHECK(root >= 0 && root < size_, "kcoll: ", name,
			    ": root ", root, " is not a rank of this group");
	}

	void check_peer(int peer, const char *name)
	{
		TORCH_CHECK(peer >= 0 && peer < size_ && peer != rank_,
			    "kcoll: ", name, ": peer ", peer,
			    " is not another rank of this group");
	}

	/* Split sizes (rows per rank; empty: even) as element counts and
	 * packed displacements, checked against the @rows there are. */
	void splits_to_counts(const std::vector<int64_t> &splits, int64_t rows,
			      int64_t row, std::vector<size_t> &cnt,
			      std::vector<size_t> &displ, const char *name)
	{
		int64_t sum = 0;

		cnt.assign(size_, 0);
		displ.assign(size_, 0);
		if (splits.empty()) {
			TORCH_CHECK(rows % size_ == 0, "kcoll: ", name,
				    ": the first dimension must divide by world_size without split sizes");
		} else {
			TORCH_CHECK((int)splits.size() == size_, "kcoll: ", name,
				    ": world_size split sizes");
		}
		for (int i = 0; i < size_; i++) {
			int64_t s = splits.empty() ? rows / size_ : splits[i];

			TORCH_CHECK(s >= 0, "kcoll: ", name, ": a negative split size");
			cnt[i] = (size_t)(s * row);
			displ[i] = (size_t)(sum * row);
			sum += s;
		}
		TORCH_CHECK(sum == rows, "kcoll: ", name, ": split sizes add up to ",
			    sum, ", the tensor has ", rows, " rows");
	}

	/* What copies block i of @flat into @outs[i], one after another. */
	static std::function<void()> unflatten(at::Tensor flat,
					       std::vector<at::Tensor> outs)
	{
		return [flat, outs]() mutable {
			int64_t at = 0;

			for (size_t i = 0; i < outs.size(); i++) {
				auto n = outs[i].numel();

				outs[i].copy_(flat.narrow(0, at, n).view_as(outs[i]));
				at += n;
			}
		};
	}

	static std::vector<at::Tensor> flatten_all(const std::vector<at::Tensor> &ts)
	{
		std::vector<at::Tensor> v;

		for (auto &t : ts)
			v.push_back(t.reshape({ -1 }));
		return v;
	}

	c10::intrusive_ptr<WorkKcoll> make_work(OpType type, const char *name,
						std::vector<at::Tensor> outs)
	{
		return c10::make_intrusive<WorkKcoll>(type, name, std::move(outs));
	}

	/* The buffer the operation writes for @t: @t itself when it is
	 * contiguous, else a contiguous copy written back on success. */
	at::Tensor dense(const c10::intrusive_ptr<WorkKcoll> &work, at::Tensor t)
	{
		if (t.is_contiguous())
			return t;
		auto c = t.contiguous();
		auto prev = work->after_;

		work->keep_.push_back(c);
		work->after_ = [prev, t, c]() mutable {
			if (prev)
				prev();
			t.copy_(c);
		};
		return c;
	}

	WorkPtr issue(const c10::intrusive_ptr<WorkKcoll> &work,
		      std::chrono::milliseconds timeout,
		      const std::function<int(coll_request **)> &fn)
	{
		return issue_n(work, timeout, 1, fn);
	}

	/* Issue @n operations for @work (in the caller's thread, so that
	 * every rank issues in program order) and queue it. A per-call
	 * timeout applies to these operations only. */
	WorkPtr issue_n(const c10::intrusive_ptr<WorkKcoll> &work,
			std::chrono::milliseconds timeout, size_t n,
			const std::function<int(coll_request **)> &fn)
	{
		std::unique_lock<std::mutex> il(issue_mu_);
		bool own = timeout != c10d::kUnsetTimeout;
		int err = 0;

		if (own)
			coll_comm_set_timeout(comm_, timeout_to_ms(timeout));
		for (size_t i = 0; i < n && !err; i++) {
			coll_request *r = nullptr;

			err = fn(&r);
			if (!err)
				work->reqs_.push_back(r);
		}
		if (own)
			coll_comm_set_timeout(comm_, timeout_ms_);
		seq_++;
		if (err && work->reqs_.empty())
			TORCH_CHECK(false, coll_err(work->name_.c_str(), err));
		work->issue_err_ = err;
		{
			std::unique_lock<std::mutex> l(mu_);
			queue_.push_back(work);
			cv_.notify_all();
		}
		il.unlock();
		/* Issued in part: what was issued completes, then fails. */
		TORCH_CHECK(!err, coll_err(work->name_.c_str(), err));
		return work;
	}

	void run()
	{
		for (;;) {
			c10::intrusive_ptr<WorkKcoll> w;
			{
				std::unique_lock<std::mutex> l(mu_);
				cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
				if (queue_.empty())
					return;
				w = queue_.front();
				queue_.pop_front();
			}
			w->complete(comm_);
		}
	}

	coll_comm *comm_ = nullptr;
	uint32_t timeout_ms_ = 0;
	uint64_t seq_ = 0;
	std::mutex issue_mu_;
	std::mutex mu_;
	std::condition_variable cv_;
	std::deque<c10::intrusive_ptr<WorkKcoll>> queue_;
	bool stop_ = false;
	std::thread thread_;
};

static c10::intrusive_ptr<c10d::ProcessGroup>
create(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
       const std::chrono::duration<float> &timeout)
{
	auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);

	return c10::make_intrusive<ProcessGroupKcoll>(store, rank, size, ms);
}

/* @pg as kcoll's process group, or NULL. */
static const ProcessGroupKcoll *
as_kcoll(const c10::intrusive_ptr<c10d::ProcessGroup> &pg)
{
	return dynamic_cast<const ProcessGroupKcoll *>(pg.get());
}

static c10::intrusive_ptr<c10d::ProcessGroup>
create_group(const c10::intrusive_ptr<c10d::Store> &store,
	     const c10::intrusive_ptr<c10d::ProcessGroup> &parent, int rank,
	     int size, const std::chrono::duration<float> &timeout)
{
	auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
	const ProcessGroupKcoll *p = as_kcoll(parent);

	TORCH_CHECK(p, "kcoll: the parent group is not kcoll's");
	return c10::make_intrusive<ProcessGroupKcoll>(store, *p, rank, size,
						      ms);
}

static c10::intrusive_ptr<c10d::ProcessGroup>
shrink(const c10::intrusive_ptr<c10d::ProcessGroup> &pg,
       const std::vector<int> &exclude, bool abort, int64_t timeout_ms)
{
	const ProcessGroupKcoll *p = as_kcoll(pg);

	TORCH_CHECK(p, "kcoll: shrink: the group is not kcoll's");
	return p->shrink(exclude, abort, timeout_ms);
}

static void revoke(const c10::intrusive_ptr<c10d::ProcessGroup> &pg)
{
	const ProcessGroupKcoll *p = as_kcoll(pg);

	TORCH_CHECK(p, "kcoll: revoke: the group is not kcoll's");
	p->revoke();
}

/*
 * kcoll_torch.report(): the last failure of @pg as a dict, None if no
 * operation failed. "lost": the ranks it found gone (a timeout's missing
 * ranks, a lost peer), what a shrink would exclude.
 */
static pybind11::object
report(const c10::intrusive_ptr<c10d::ProcessGroup> &pg)
{
	static const char *const reasons[] = {
		"none", "timeout", "peer lost", "mismatch", "aborted", "error",
		"gpu stream",
	};
	const ProcessGroupKcoll *p = as_kcoll(pg);
	pybind11::list missing, lost;
	pybind11::dict d;
	char line[512] = "";
	coll_report r;
	uint32_t i, n;

	TORCH_CHECK(p, "kcoll: report: the group is not kcoll's");
	{
		pybind11::gil_scoped_release nogil;

		p->last_report(&r);
	}
	if (!r.error)
		return pybind11::none();
	coll_report_format(&r, line, sizeof(line));
	n = std::min<uint32_t>(r.nmissing, COLL_REPORT_MAX_MISSING);
	for (i = 0; i < n; i++) {
		missing.append(r.missing[i]);
		if (r.reason == COLL_REPORT_TIMEOUT)
			lost.append(r.missing[i]);
	}
	if (r.reason == COLL_REPORT_PEER_LOST && r.peer >= 0)
		lost.append(r.peer);
	d["error"] = r.error;
	d["reason"] = r.reason >= 0 &&
			      r.reason < (int)(sizeof(reasons) / sizeof(reasons[0])) ?
		reasons[r.reason] : "unknown";
	d["peer"] = r.peer >= 0 ? pybind11::object(pybind11::int_(r.peer)) :
		pybind11::none();
	d["seq"] = r.seq;
	d["elapsed_ms"] = r.elapsed_ms;
	d["nmissing"] = r.nmissing;
	d["missing"] = missing;
	d["lost"] = lost;
	d["text"] = std::string(line);
	return d;
}

static pybind11::object
comm_ids(const c10::intrusive_ptr<c10d::ProcessGroup> &pg)
{
	const ProcessGroupKcoll *p = as_kcoll(pg);

	if (!p)
		return pybind11::none();
	auto ids = p->comm_ids();
	return pybind11::make_tuple(ids.first, ids.second);
}

} // namespace kcoll_torch

PYBIND11_MODULE(_C, m)
{
	m.doc() = "kcoll process group for torch.distributed (see kcoll_torch)";
	m.def("create_process_group", &kcoll_torch::create,
	      pybind11::arg("store"), pybind11::arg("rank"),
	      pybind11::arg("world_size"), pybind11::arg("timeout"),
	      pybind11::call_guard<pybind11::gil_scoped_release>());
	m.def("create_group", &kcoll_torch::create_group,
	      pybind11::arg("store"), pybind11::arg("parent"),
	      pybind11::arg("rank"), pybind11::arg("world_size"),
	      pybind11::arg("timeout"),
	      pybind11::call_guard<pybind11::gil_scoped_release>());
	m.def("shrink", &kcoll_torch::shrink, pybind11::arg("group"),
	      pybind11::arg("exclude"), pybind11::arg("abort"),
	      pybind11::arg("timeout_ms"),
	      pybind11::call_guard<pybind11::gil_scoped_release>());
	m.def("revoke", &kcoll_torch::revoke, pybind11::arg("group"),
	      pybind11::call_guard<pybind11::gil_scoped_release>());
	m.def("report", &kcoll_torch::report, pybind11::arg("group"));
	m.def("comm_ids", &kcoll_torch::comm_ids, pybind11::arg("group"),
	      "(uid, parent uid) of a kcoll group's communicator, or None "
	      "for another backend's");
	m.attr("libcoll_version") = "KCOLL_0.12";
}

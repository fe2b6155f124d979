// SPDX-License-Identifier: MIT
/*
 * libkcoll-mpi: run an unmodified MPI program's collectives through kcoll.
 *
 *   LD_PRELOAD=libkcoll-mpi.so mpirun ... ./program     (or -x LD_PRELOAD)
 *
 * The MPI profiling interface: this library defines MPI_Allreduce & co.
 * and reaches the real MPI through PMPI_*. It mirrors MPI_COMM_WORLD (at
 * MPI_Init) and every communicator derived from a mirrored one with
 * MPI_Comm_dup, _dup_with_info, _split, _split_type, _create or
 * _create_group: a kcoll communicator of the same ranks made from the
 * parent's mirror with no bootstrap (for _split its coll_comm_split(), for
 * the others its coll_comm_create_group() over the new communicator's
 * ranks), or where that fails bootstrapped through MPI itself (rank 0's
 * unique id goes out with PMPI_Bcast). The v-variants
 * (MPI_Allgatherv, MPI_Reduce_scatter, MPI_Alltoallv and their I-forms)
 * go to kcoll where every rank's module has them. A call on a mirrored communicator
 * with a contiguous predefined datatype kcoll has and a predefined
 * reduction (SUM, PROD, MIN, MAX) runs through kcoll; everything else
 * (other datatypes and ops, MPI_Allgather with different send and receive
 * types, inter-communicators) goes to the real MPI unchanged. The
 * non-blocking forms (MPI_Iallreduce ...) return MPI generalized
 * requests that the interposed MPI_Wait/Test families complete. Whether a communicator is mirrored is agreed by all of its
 * ranks, so they always take the same path.
 *
 * Environment:
 *   KCOLL_MPI=0          mirror nothing (every call goes to MPI)
 *   KCOLL_MPI_STATS=1    at MPI_Finalize, each rank prints to stderr how
 *                        many calls of each function took which path, and
 *                        why the others went to MPI
 *   KCOLL_MPI_VERBOSE=1  say on stderr why a communicator is not mirrored
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <mpi.h>
#include <coll.h>

#define KM_MAX_COMMS	256

struct km_mirror {
	MPI_Comm comm;
	coll_comm *kc;
	int rank, size;
	int caps;		/* what every rank's module has: 1 the first
				 * collectives, 2 gather and scatter too,
				 * 3 the v-variants too */
};

enum km_fn {
	KM_ALLREDUCE, KM_REDUCE, KM_BCAST, KM_ALLGATHER, KM_REDSCAT,
	KM_ALLTOALL, KM_BARRIER, KM_GATHER, KM_SCATTER, KM_ALLGATHERV,
	KM_REDSCATV, KM_ALLTOALLV, KM_NFN
};

/* The counters of a non-blocking form follow at + KM_NFN. */
static const char *const km_fn_name[2 * KM_NFN] = {
	"MPI_Allreduce", "MPI_Reduce", "MPI_Bcast", "MPI_Allgather",
	"MPI_Reduce_scatter_block", "MPI_Alltoall", "MPI_Barrier",
	"MPI_Gather", "MPI_Scatter", "MPI_Allgatherv", "MPI_Reduce_scatter",
	"MPI_Alltoallv",
	"MPI_Iallreduce", "MPI_Ireduce", "MPI_Ibcast", "MPI_Iallgather",
	"MPI_Ireduce_scatter_block", "MPI_Ialltoall", "MPI_Ibarrier",
	"MPI_Igather", "MPI_Iscatter", "MPI_Iallgatherv",
	"MPI_Ireduce_scatter", "MPI_Ialltoallv",
};

struct km_req;

/* Why a call went to MPI. */
enum km_why {
	KM_W_COMM, KM_W_DTYPE, KM_W_OP, KM_W_SHAPE, KM_W_OLD, KM_W_NWHY
};

static const char *const km_why_name[KM_W_NWHY] = {
	"communicator not mirrored", "datatype", "reduction", "arguments",
	"a kcoll module without it",
};

static struct {
	pthread_mutex_t lock;
	struct km_mirror m[KM_MAX_COMMS];
	int n;
	int pending;		/* slots reserved by mirrors being made */
	bool off, verbose, stats;
	unsigned long kc[2 * KM_NFN], mpi[2 * KM_NFN][KM_W_NWHY];
	unsigned long err[2 * KM_NFN];
	struct km_req *reqs;	/* non-blocking operations MPI holds */
	struct km_zombie *zombies;	/* freed by MPI, requests still held */
	unsigned long mirrored, refused, split, group;
} km = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * A mirror whose MPI communicator was freed while MPI still held requests
 * of its non-blocking operations: MPI_Comm_free() lets pending operations
 * complete normally, and their coll_requests live in the kcoll
 * communicator, so it is destroyed when the last of them is freed
 * (km_nb_free()), not with the MPI handle (which MPI may hand out again).
 */
struct km_zombie {
	coll_comm *kc;
	struct km_zombie *next;
};

static void km_count_mpi(int fn, enum km_why why)
{
	__atomic_fetch_add(&km.mpi[fn][why], 1, __ATOMIC_RELAXED);
}

/* The mirror of @comm, or NULL. Must hold km.lock. */
static struct km_mirror *km_find_locked(MPI_Comm comm)
{
	int i;

	if (comm == MPI_COMM_NULL)
		return NULL;
	for (i = 0; i < km.n; i++)
		if (km.m[i].comm == comm)
			return &km.m[i];
	return NULL;
}

static struct km_mirror *km_find(MPI_Comm comm)
{
	struct km_mirror *r;

	pthread_mutex_lock(&km.lock);
	r = km_find_locked(comm);
	pthread_mutex_unlock(&km.lock);
	return r;
}

/* What the loaded module has (struct km_mirror's caps): an older one
 * lacks gather and scatter, or the v-variants. */
static int km_local_caps(void)
{
	static int caps = -1;
	struct kcoll_query q;
	uint64_t gs = 1ULL << KCOLL_OP_GATHER | 1ULL << KCOLL_OP_SCATTER;
	uint64_t v = 1ULL << KCOLL_OP_ALLGATHERV |
		     1ULL << KCOLL_OP_REDUCE_SCATTERV |
		     1ULL << KCOLL_OP_ALLTOALLV;

	if (caps < 0) {
		caps = 1;
		if (!coll_ring_query(-1, &q) && (q.ops_supported & gs) == gs)
			caps = (q.ops_supported & v) == v ? 3 : 2;
	}
	return caps;
}

/* Can this process use kcoll at all? (The module is loaded.) */
static int km_local_ok(void)
{
	int fd = open("/dev/kcoll", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

/*
 * Mirror @comm with a kcoll communicator: collective over @comm. Every
 * rank first says whether it can (the module is there); only if all can
 * does rank 0 start a bootstrap and send its id, and only if every rank
 * then created its communicator is the mirror kept (else every rank drops
 * its own): the ranks never disagree on the path a call takes.
 */
/* How a mirror was made (the statistics count the derived ones). */
enum km_how { KM_BOOTSTRAP, KM_SPLIT, KM_GROUP };

/*
 * A slot for a mirror being made, held across its collective calls: two
 * threads making communicators at once (MPI_THREAD_MULTIPLE) cannot both
 * take the last one. km_keep() fills it; km_unreserve() gives it back.
 */
static bool km_reserve(void)
{
	bool ok;

	pthread_mutex_lock(&km.lock);
	ok = km.n + km.pending < KM_MAX_COMMS;
	km.pending += ok;
	pthread_mutex_unlock(&km.lock);
	return ok;
}

static void km_unreserve(void)
{
	pthread_mutex_lock(&km.lock);
	km.pending--;
	pthread_mutex_unlock(&km.lock);
}

/* Keep @kc as @comm's mirror (every rank of @comm agreed) in the slot
 * reserved for it. */
static void km_keep(MPI_Comm comm, coll_comm *kc, int rank, int size,
		    int caps, enum km_how how)
{
	pthread_mutex_lock(&km.lock);
	km.pending--;
	km.m[km.n++] = (struct km_mirror){ comm, kc, rank, size, caps };
	km.mirrored++;
	km.split += how == KM_SPLIT;
	km.group += how == KM_GROUP;
	pthread_mutex_unlock(&km.lock);
}

static void km_mirror(MPI_Comm comm)
{
	coll_unique_id id;
	coll_comm *kc = NULL;
	int rank, size, inter = 0, ok, all, err = 0;
	bool reserved;

	if (km.off || comm == MPI_COMM_NULL)
		return;
	if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter)
		return;
	PMPI_Comm_rank(comm, &rank);
	PMPI_Comm_size(comm, &size);
	reserved = km_reserve();
	ok = reserved && km_local_ok();
	PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
	if (!all) {
		if (km.verbose && !rank)
			fprintf(stderr, "kcoll-mpi: a communicator of %d ranks is not mirrored: /dev/kcoll is missing on a rank, or too many communicators\n",
				size);
		km.refused++;
		goto out_unreserve;
	}
	memset(&id, 0, sizeof(id));
	if (!rank)
		err = coll_get_unique_id(&id);
	PMPI_Bcast(&err, 1, MPI_INT, 0, comm);
	if (err) {
		if (km.verbose && !rank)
			fprintf(stderr, "kcoll-mpi: no unique id: %s (%s)\n",
				coll_strerror(err), coll_last_error());
		km.refused++;
		goto out_unreserve;
	}
	PMPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, comm);
	err = coll_comm_init_rank(&kc, size, &id, rank);
	/* What this rank's module has (km_local_caps()); the least of all
	 * ranks' is the mirror's. */
	ok = err ? 0 : km_local_caps();
	if (err && km.verbose)
		fprintf(stderr, "kcoll-mpi: rank %d: coll_comm_init_rank: %s (%s)\n",
			rank, coll_strerror(err), coll_last_error());
	PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
	if (!all) {
		if (kc)
			coll_comm_abort(kc);
		km.refused++;
		goto out_unreserve;
	}
	km_keep(comm, kc, rank, size, all, KM_BOOTSTRAP);
	return;

out_unreserve:
	if (reserved)
		km_unreserve();
}

/*
 * The end of a derived mirror: @kc (NULL, @err from @how's call @what, if
 * it failed) is kept as @newcomm's mirror only if every rank of @newcomm
 * has its child at the rank MPI gave it, with room to keep it; else every
 * one drops its child and km_mirror() bootstraps one. Collective over
 * @newcomm.
 */
static void km_derived(MPI_Comm newcomm, coll_comm *kc, int err, int caps,
		       enum km_how how, const char *what)
{
	int rank, size, ok, all;
	bool reserved;

	PMPI_Comm_rank(newcomm, &rank);
	PMPI_Comm_size(newcomm, &size);
	reserved = km_reserve();
	ok = reserved && !err && kc && coll_comm_rank(kc) == rank &&
	     coll_comm_size(kc) == size;
	if (err && km.verbose)
		fprintf(stderr, "kcoll-mpi: rank %d: %s: %s (%s)\n",
			rank, what, coll_strerror(err), coll_last_error());
	PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, newcomm);
	if (!all) {
		if (kc)
			coll_comm_abort(kc);
		if (reserved)
			km_unreserve();
		km_mirror(newcomm);
		return;
	}
	km_keep(newcomm, kc, rank, size, caps, how);
}

/*
 * MPI_Comm_split of a mirrored @parent: the new communicator's mirror is
 * the parent mirror's coll_comm_split(), no bootstrap (kcoll orders a
 * color's members as MPI does: by key, then by rank in the parent).
 * Collective over the parent as MPI_Comm_split is; a rank with
 * MPI_UNDEFINED takes part with no color. Kept as km_derived() says.
 */
static void km_mirror_split(coll_comm *pkc, int caps, int color, int key,
			    MPI_Comm newcomm)
{
	coll_comm *kc = NULL;
	int err;

	/* No new communicator here (MPI_UNDEFINED): no color, no child. */
	err = coll_comm_split(pkc, color == MPI_UNDEFINED ?
			      COLL_SPLIT_NOCOLOR : color, key, &kc);
	if (newcomm == MPI_COMM_NULL)
		return;
	km_derived(newcomm, kc, err, caps, KM_SPLIT, "coll_comm_split");
}

/*
 * @newcomm, made of some ranks of mirrored @comm (dup, split_type, create,
 * create_group): its mirror is @comm's mirror's coll_comm_create_group()
 * over @newcomm's ranks in @comm, no bootstrap; collective over @newcomm
 * alone. Rank 0 of @newcomm picks the tag (random: each communicator MPI
 * makes is a kcoll one of its own). Kept as km_derived() says.
 */
static void km_mirror_group(MPI_Comm comm, MPI_Comm newcomm)
{
	int rank, size, i, err = -ENOMEM, caps = 1;
	int *idx = NULL, *ranks = NULL;
	MPI_Group pg = MPI_GROUP_NULL, ng = MPI_GROUP_NULL;
	struct km_mirror *parent;
	coll_comm *pkc = NULL, *kc = NULL;
	uint64_t tag = 0;

	if (km.off || newcomm == MPI_COMM_NULL)
		return;
	pthread_mutex_lock(&km.lock);
	parent = km_find_locked(comm);
	if (parent) {
		pkc = parent->kc;
		caps = parent->caps;
	}
	pthread_mutex_unlock(&km.lock);
	if (!pkc)
		return;
	PMPI_Comm_rank(newcomm, &rank);
	PMPI_Comm_size(newcomm, &size);
	if (!rank && getentropy(&tag, sizeof(tag)))
		tag = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);
	PMPI_Bcast(&tag, 1, MPI_UINT64_T, 0, newcomm);
	idx = malloc((size_t)size * sizeof(*idx));
	ranks = malloc((size_t)size * sizeof(*ranks));
	if (idx && ranks && PMPI_Comm_group(comm, &pg) == MPI_SUCCESS &&
	    PMPI_Comm_group(newcomm, &ng) == MPI_SUCCESS) {
		for (i = 0; i < size; i++)
			idx[i] = i;
		err = PMPI_Group_translate_ranks(ng, size, idx, pg, ranks) ==
		      MPI_SUCCESS ? 0 : -EINVAL;
		for (i = 0; !err && i < size; i++)
			if (ranks[i] == MPI_UNDEFINED)
				err = -EINVAL;
	}
	if (!err)
		err = coll_comm_create_group(pkc, ranks, size, tag, &kc);
	if (pg != MPI_GROUP_NULL)
		PMPI_Group_free(&pg);
	if (ng != MPI_GROUP_NULL)
		PMPI_Group_free(&ng);
	free(ranks);
	free(idx);
	km_derived(newcomm, kc, err, caps, KM_GROUP, "coll_comm_create_group");
}

/* Append to @line (@size bytes, @o used); what does not fit is cut. */
static __attribute__((format(printf, 4, 5)))
void km_append(char *line, size_t size, size_t *o, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (*o + 1 >= size)
		return;
	va_start(ap, fmt);
	k = vsnprintf(line + *o, size - *o, fmt, ap);
	va_end(ap);
	if (k > 0)
		*o = *o + (size_t)k < size ? *o + (size_t)k : size - 1;
}

static bool km_kc_orphan_locked(const coll_comm *kc);

/*
 * @comm is going: its mirror goes from the table at once, and its kcoll
 * communicator with it unless requests MPI holds still use it (a zombie
 * then, until km_nb_free() frees the last of them).
 */
static void km_unmirror(MPI_Comm comm)
{
	struct km_zombie *z = NULL;
	coll_comm *kc = NULL;
	int i;

	pthread_mutex_lock(&km.lock);
	for (i = 0; i < km.n; i++)
		if (km.m[i].comm == comm) {
			kc = km.m[i].kc;
			km.m[i] = km.m[--km.n];
			break;
		}
	if (kc && km_kc_orphan_locked(kc)) {
		z = malloc(sizeof(*z));
		if (z) {
			z->kc = kc;
			z->next = km.zombies;
			km.zombies = z;
		}
		/* Without memory for the note, the communicator lives on
		 * (its kernel side goes when the process closes it): better
		 * than freeing what MPI's requests still point to. */
		kc = NULL;
	}
	pthread_mutex_unlock(&km.lock);
	if (kc)
		coll_comm_destroy(kc);
}

static void km_init(void)
{
	const char *e = getenv("KCOLL_MPI");

	km.off = e && !strcmp(e, "0");
	e = getenv("KCOLL_MPI_VERBOSE");
	km.verbose = e && *e && strcmp(e, "0");
	e = getenv("KCOLL_MPI_STATS");
	km.stats = e && *e && strcmp(e, "0");
	km_mirror(MPI_COMM_WORLD);
}

int MPI_Init(int *argc, char ***argv)
{
	int rc = PMPI_Init(argc, argv);

	if (rc == MPI_SUCCESS)
		km_init();
	return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	int rc = PMPI_Init_thread(argc, argv, required, provided);

	if (rc == MPI_SUCCESS)
		km_init();
	return rc;
}

static void km_nb_finalize(void);

int MPI_Finalize(void)
{
	int i, w, rank = -1;

	PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (km.stats) {
		char line[4096];
		size_t o = 0;

		km_append(line, sizeof(line), &o, "kcoll-mpi: rank %d: %lu communicator(s) mirrored, %lu not; %lu by split; %lu by group;",
			  rank, km.mirrored, km.refused, km.split, km.group);
		for (i = 0; i < 2 * KM_NFN; i++) {
			unsigned long m = 0;

			for (w = 0; w < KM_W_NWHY; w++)
				m += km.mpi[i][w];
			if (!km.kc[i] && !m)
				continue;
			km_append(line, sizeof(line), &o, " %s %lu kcoll%s, %lu mpi",
				  km_fn_name[i], km.kc[i],
				  km.err[i] ? " (some failed)" : "", m);
			for (w = 0; w < KM_W_NWHY; w++)
				if (km.mpi[i][w])
					km_append(line, sizeof(line), &o, " (%s %lu)",
						  km_why_name[w], km.mpi[i][w]);
			km_append(line, sizeof(line), &o, ";");
		}
		fprintf(stderr, "%s\n", line);
	}
	km_nb_finalize();
	while (km.n)
		km_unmirror(km.m[km.n - 1].comm);
	while (km.zombies) {
		struct km_zombie *z = km.zombies;

		km.zombies = z->next;
		coll_comm_destroy(z->kc);
		free(z);
	}
	return PMPI_Finalize();
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_dup(comm, newcomm);

	if (rc == MPI_SUCCESS)
		km_mirror_group(comm, *newcomm);
	return rc;
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_dup_with_info(comm, info, newcomm);

	if (rc == MPI_SUCCESS)
		km_mirror_group(comm, *newcomm);
	return rc;
}

/*
 * Whether the parent is mirrored is the same on all of its ranks, and
 * every rank of a new communicator comes from the parent: the new one's
 * ranks agree on whether to mirror it.
 */
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_split(comm, color, key, newcomm);
	struct km_mirror *parent;
	coll_comm *pkc = NULL;
	int caps = 1;

	pthread_mutex_lock(&km.lock);
	parent = km_find_locked(comm);
	if (parent) {
		pkc = parent->kc;
		caps = parent->caps;
	}
	pthread_mutex_unlock(&km.lock);
	/* Every rank of the parent takes part, MPI_UNDEFINED too, and so
	 * does one whose own split failed (MPI_ERRORS_RETURN): the others'
	 * allgather on the parent needs it. */
	if (pkc)
		km_mirror_split(pkc, caps, rc == MPI_SUCCESS ? color : MPI_UNDEFINED,
				key, rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL);
	return rc;
}

int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info,
			MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_split_type(comm, type, key, info, newcomm);

	if (rc == MPI_SUCCESS)
		km_mirror_group(comm, *newcomm);
	return rc;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_create(comm, group, newcomm);

	if (rc == MPI_SUCCESS)
		km_mirror_group(comm, *newcomm);
	return rc;
}

/* Collective over @group's ranks alone: so is coll_comm_create_group(). */
int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag,
			  MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_create_group(comm, group, tag, newcomm);

	if (rc == MPI_SUCCESS)
		km_mirror_group(comm, *newcomm);
	return rc;
}

int MPI_Comm_free(MPI_Comm *comm)
{
	if (comm && *comm != MPI_COMM_NULL)
		km_unmirror(*comm);
	return PMPI_Comm_free(comm);
}

/* kcoll's type for @dt; @reduce: arithmetic types only. -1: none. */
static int km_dtype(MPI_Datatype dt, bool reduce)
{
	if (dt == MPI_FLOAT)
		return COLL_DTYPE_FP32;
	if (dt == MPI_DOUBLE)
		return COLL_DTYPE_FP64;
	if (dt == MPI_INT || dt == MPI_INT32_T)
		return sizeof(int) == 4 ? COLL_DTYPE_INT32 : -1;
	if (dt == MPI_UNSIGNED || dt == MPI_UINT32_T)
		return sizeof(unsigned int) == 4 ? COLL_DTYPE_UINT32 : -1;
	if (dt == MPI_LONG || dt == MPI_LONG_LONG || dt == MPI_LONG_LONG_INT ||
	    dt == MPI_INT64_T)
		return COLL_DTYPE_INT64;
	if (dt == MPI_UNSIGNED_LONG || dt == MPI_UNSIGNED_LONG_LONG ||
	    dt == MPI_UINT64_T)
		return COLL_DTYPE_UINT64;
	if (dt == MPI_INT8_T || dt == MPI_SIGNED_CHAR)
		return COLL_DTYPE_INT8;
	if (dt == MPI_UINT8_T || dt == MPI_UNSIGNED_CHAR)
		return COLL_DTYPE_UINT8;
	/* Bytes and chars move, but are no operands of MPI's reductions. */
	if (!reduce && (dt == MPI_BYTE || dt == MPI_CHAR))
		return COLL_DTYPE_UINT8;
	return -1;
}

static int km_op(MPI_Op op)
{
	if (op == MPI_SUM)
		return COLL_REDOP_SUM;
	if (op == MPI_PROD)
		return COLL_REDOP_PROD;
	if (op == MPI_MIN)
		return COLL_REDOP_MIN;
	if (op == MPI_MAX)
		return COLL_REDOP_MAX;
	return -1;
}

/*
 * One operation through kcoll: blocking (on the stack, waited for at
 * once) or non-blocking (on the heap, behind an MPI generalized request,
 * see km_nb_start()).
 */
struct km_req {
	MPI_Request mreq;	/* non-blocking: the generalized request */
	coll_request *creq;
	coll_comm *kc;		/* the mirror's, which @creq lives in */
	MPI_Comm comm;		/* for the error handler; MPI_COMM_NULL
				 * once MPI freed it (km_unmirror()) */
	int rank;
	int fn;			/* km_fn, + KM_NFN for the non-blocking form */
	int err;		/* kcoll's result, once completed */
	bool done;
	/* After success: the in-place reduce-scatter's block to move. */
	void *mv_dst;
	const void *mv_src;
	size_t mv_len;
	/* Gather and scatter move bytes: a side whose type is not one
	 * contiguous kcoll type is packed into @tmp_s before the issue, or
	 * received into @tmp and unpacked after success, @u_n blocks of
	 * @u_block bytes into @u_dst, @u_stride bytes apart, each @u_count
	 * of @u_dt. */
	void *tmp_s, *tmp;
	void *u_dst;
	size_t u_block, u_stride;
	int u_n, u_count;
	MPI_Datatype u_dt;
	struct km_req *next;	/* km.reqs */
};

/* Returned by the km_issue_* helpers: the call goes to MPI. */
#define KM_PASS	1

/*
 * A kcoll failure inside a call MPI promised to complete: the mirror's
 * ranks may now be out of step, so there is no safe fallback. Report it
 * the MPI way: the communicator's error handler (by default, abort).
 */
static int km_fail(const struct km_req *r, int err)
{
	MPI_Comm comm = __atomic_load_n(&r->comm, __ATOMIC_RELAXED);
	int rc;

	__atomic_fetch_add(&km.err[r->fn], 1, __ATOMIC_RELAXED);
	fprintf(stderr, "kcoll-mpi: %s on rank %d failed: %s (%s)\n",
		km_fn_name[r->fn], r->rank, coll_strerror(err),
		coll_last_error());
	/* A communicator freed with the operation in flight has no handler
	 * left: MPI's errors without one go to MPI_COMM_WORLD's. */
	rc = PMPI_Comm_call_errhandler(comm != MPI_COMM_NULL ? comm :
				       MPI_COMM_WORLD, MPI_ERR_OTHER);
	return rc != MPI_SUCCESS ? rc : MPI_ERR_OTHER;
}

static void km_req_init(struct km_req *r, struct km_mirror *m, int fn,
			bool nb)
{
	r->comm = m->comm;
	r->kc = m->kc;
	r->rank = m->rank;
	r->fn = fn + (nb ? KM_NFN : 0);
}

/* @count of @dt at @buf to or from @bytes packed bytes (MPI_Pack on
 * MPI_COMM_SELF: no message, so no receive of the program's can take
 * it); false unless exactly @bytes moved. */
static bool km_pack(const void *buf, int count, MPI_Datatype dt, void *out,
		    size_t bytes)
{
	int pos = 0;

	return bytes <= INT_MAX &&
	       PMPI_Pack(buf, count, dt, out, (int)bytes, &pos,
			 MPI_COMM_SELF) == MPI_SUCCESS && (size_t)pos == bytes;
}

static bool km_unpack(const void *in, size_t bytes, void *buf, int count,
		      MPI_Datatype dt)
{
	int pos = 0;

	return bytes <= INT_MAX &&
	       PMPI_Unpack(in, (int)bytes, &pos, buf, count, dt,
			   MPI_COMM_SELF) == MPI_SUCCESS && (size_t)pos == bytes;
}

static void km_req_tmp_free(struct km_req *r)
{
	free(r->tmp_s);
	free(r->tmp);
	r->tmp_s = r->tmp = NULL;
}

/* What follows a completed operation: the block to move, the count. */
static void km_req_done(struct km_req *r, int err)
{
	int i;

	r->done = true;
	r->err = err;
	if (!err && r->mv_len)
		memmove(r->mv_dst, r->mv_src, r->mv_len);
	for (i = 0; !err && r->tmp && i < r->u_n; i++)
		if (!km_unpack((char *)r->tmp + (size_t)i * r->u_block,
			       r->u_block, (char *)r->u_dst + i * r->u_stride,
			       r->u_count, r->u_dt))
			r->err = err = -EIO;
	km_req_tmp_free(r);
	if (!err)
		__atomic_fetch_add(&km.kc[r->fn], 1, __ATOMIC_RELAXED);
}

/* The blocking form: wait for the operation km_issue_*() started. */
static int km_block(struct km_req *r, int ret)
{
	int err;

	if (ret < 0) {
		km_req_tmp_free(r);
		return km_fail(r, ret);
	}
	err = coll_wait(r->creq);
	coll_request_free(r->creq);
	km_req_done(r, err);	/* may fail the unpacking */
	return r->err ? km_fail(r, r->err) : MPI_SUCCESS;
}

/* Mirror, kcoll dtype and op for a reduction; NULL (counted) if it goes
 * to MPI. */
static struct km_mirror *km_red(int fn, MPI_Comm comm, int count,
				MPI_Datatype dt, MPI_Op op, int *kdt, int *kop)
{
	struct km_mirror *m = km_find(comm);

	if (!m) {
		km_count_mpi(fn, KM_W_COMM);
		return NULL;
	}
	*kdt = km_dtype(dt, true);
	if (*kdt < 0) {
		km_count_mpi(fn, KM_W_DTYPE);
		return NULL;
	}
	*kop = km_op(op);
	if (*kop < 0) {
		km_count_mpi(fn, KM_W_OP);
		return NULL;
	}
	if (count < 0) {
		km_count_mpi(fn, KM_W_SHAPE);
		return NULL;
	}
	return m;
}

/* The shape of an allgather/alltoall: one datatype and one count each
 * way (MPI allows matching type signatures; kcoll needs the same). */
static struct km_mirror *km_move(int fn, MPI_Comm comm, bool in_place,
				 int scount, MPI_Datatype sdt, int rcount,
				 MPI_Datatype rdt, int *kdt)
{
	struct km_mirror *m = km_find(comm);

	if (!m) {
		km_count_mpi(fn, KM_W_COMM);
		return NULL;
	}
	*kdt = km_dtype(rdt, false);
	if (*kdt < 0 || (!in_place && km_dtype(sdt, false) != *kdt)) {
		km_count_mpi(fn, KM_W_DTYPE);
		return NULL;
	}
	if (rcount < 0 || (!in_place && (scount != rcount || sdt != rdt))) {
		km_count_mpi(fn, KM_W_SHAPE);
		return NULL;
	}
	return m;
}

/*
 * The km_issue_* helpers: KM_PASS if the call goes to MPI (counted),
 * else the operation is issued into @r (0) or could not be (-errno).
 */
static int km_issue_allreduce(const void *sbuf, void *rbuf, int count,
			      MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
			      bool nb, struct km_req *r)
{
	int fn = KM_ALLREDUCE + (nb ? KM_NFN : 0), kdt, kop;
	struct km_mirror *m = km_red(fn, comm, count, dt, op, &kdt, &kop);

	if (!m)
		return KM_PASS;
	km_req_init(r, m, KM_ALLREDUCE, nb);
	if (sbuf == MPI_IN_PLACE)
		sbuf = rbuf;
	return coll_iallreduce(sbuf, rbuf, (size_t)count, kdt, kop, m->kc,
			       &r->creq);
}

static int km_issue_reduce(const void *sbuf, void *rbuf, int count,
			   MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm,
			   bool nb, struct km_req *r)
{
	int fn = KM_REDUCE + (nb ? KM_NFN : 0), kdt, kop;
	struct km_mirror *m = km_red(fn, comm, count, dt, op, &kdt, &kop);

	if (m && (root < 0 || root >= m->size)) {
		km_count_mpi(fn, KM_W_SHAPE);
		m = NULL;
	}
	if (!m)
		return KM_PASS;
	km_req_init(r, m, KM_REDUCE, nb);
	if (sbuf == MPI_IN_PLACE)
		sbuf = rbuf;
	return coll_ireduce(sbuf, m->rank == root ? rbuf : NULL, (size_t)count,
			    kdt, kop, root, m->kc, &r->creq);
}

static int km_issue_bcast(void *buf, int count, MPI_Datatype dt, int root,
			  MPI_Comm comm, bool nb, struct km_req *r)
{
	int fn = KM_BCAST + (nb ? KM_NFN : 0), kdt;
	struct km_mirror *m = km_find(comm);

	if (!m) {
		km_count_mpi(fn, KM_W_COMM);
		return KM_PASS;
	}
	kdt = km_dtype(dt, false);
	if (kdt < 0 || count < 0 || root < 0 || root >= m->size) {
		km_count_mpi(fn, kdt < 0 ? KM_W_DTYPE : KM_W_SHAPE);
		return KM_PASS;
	}
	km_req_init(r, m, KM_BCAST, nb);
	return coll_ibroadcast(buf, buf, (size_t)count, kdt, root, m->kc,
			       &r->creq);
}

static int km_issue_allgather(const void *sbuf, int scount, MPI_Datatype sdt,
			      void *rbuf, int rcount, MPI_Datatype rdt,
			      MPI_Comm comm, bool nb, struct km_req *r)
{
	int fn = KM_ALLGATHER + (nb ? KM_NFN : 0), kdt;
	bool in_place = sbuf == MPI_IN_PLACE;
	struct km_mirror *m;

	m = km_move(fn, comm, in_place, scount, sdt, rcount, rdt, &kdt);
	if (!m)
		return KM_PASS;
	km_req_init(r, m, KM_ALLGATHER, nb);
	/* In place: this rank's block already sits at its place in rbuf,
	 * which is kcoll's in-place form too. */
	if (in_place)
		sbuf = (char *)rbuf + (size_t)m->rank * (size_t)rcount *
				      coll_dtype_size(kdt);
	return coll_iallgather(sbuf, rbuf, (size_t)rcount, kdt, m->kc,
			       &r->creq);
}

static int km_issue_redscat(const void *sbuf, void *rbuf, int rcount,
			    MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
			    bool nb, struct km_req *r)
{
	int fn = KM_REDSCAT + (nb ? KM_NFN : 0), kdt, kop;
	struct km_mirror *m = km_red(fn, comm, rcount, dt, op, &kdt, &kop);
	size_t bytes;
	char *own;

	if (!m)
		return KM_PASS;
	km_req_init(r, m, KM_REDSCAT, nb);
	if (sbuf != MPI_IN_PLACE)
		return coll_ireduce_scatter(sbuf, rbuf, (size_t)rcount, kdt,
					    kop, m->kc, &r->creq);
	/* MPI: the input is rbuf, the result goes to its first block.
	 * kcoll's in-place result is block @rank: moved once done. */
	bytes = (size_t)rcount * coll_dtype_size(kdt);
	own = (char *)rbuf + (size_t)m->rank * bytes;
	if (m->rank) {
		r->mv_dst = rbuf;
		r->mv_src = own;
		r->mv_len = bytes;
	}
	return coll_ireduce_scatter(rbuf, own, (size_t)rcount, kdt, kop,
				    m->kc, &r->creq);
}

static int km_issue_alltoall(const void *sbuf, int scount, MPI_Datatype sdt,
			     void *rbuf, int rcount, MPI_Datatype rdt,
			     MPI_Comm comm, bool nb, struct km_req *r)
{
	int fn = KM_ALLTOALL + (nb ? KM_NFN : 0), kdt;
	bool in_place = sbuf == MPI_IN_PLACE;
	struct km_mirror *m;

	m = km_move(fn, comm, in_place, scount, sdt, rcount, rdt, &kdt);
	if (!m)
		return KM_PASS;
	km_req_init(r, m, KM_ALLTOALL, nb);
	return coll_ialltoall(in_place ? rbuf : sbuf, rbuf, (size_t)rcount,
			      kdt, m->kc, &r->creq);
}

/*
 * The v-variants: per-rank int counts and displacements, in elements of
 * one contiguous kcoll type both ways (its extent is its size), as
 * libcoll's size_t arrays, which it copies before returning. Only where
 * every rank's module has them (caps 3): every rank then decides alike
 * from the types, which a correct program passes alike.
 */
static struct km_mirror *km_vmove(int fn, MPI_Comm comm, bool in_place,
				  MPI_Datatype sdt, MPI_Datatype rdt, int *kdt)
{
	struct km_mirror *m = km_find(comm);

	if (!m) {
		km_count_mpi(fn, KM_W_COMM);
		return NULL;
	}
	if (m->caps < 3) {
		km_count_mpi(fn, KM_W_OLD);
		return NULL;
	}
	*kdt = km_dtype(rdt, false);
	if (*kdt < 0 || (!in_place && sdt != rdt)) {
		km_count_mpi(fn, KM_W_DTYPE);
		return NULL;
	}
	return m;
}

/* @n ints as size_t (negative: 0, which MPI calls erroneous anyway). */
static size_t *km_sizes(const int *a, int n)
{
	size_t *v = malloc((size_t)(n ? n : 1) * sizeof(*v));
	int i;

	for (i = 0; v && i < n; i++)
		v[i] = a[i] > 0 ? (size_t)a[i] : 0;
	return v;
}

/* Elements a buffer of blocks @c at @d (elements) spans. */
static size_t km_extent(const size_t *c, const size_t *d, int n)
{
	size_t e = 0;
	int i;

	for (i = 0; i < n; i++)
		if (c[i] && d[i] + c[i] > e)
			e = d[i] + c[i];
	return e;
}

static int km_issue_allgatherv(const void *sbuf, void *rbuf,
			       const int *rcounts, const int *displs,
			       MPI_Datatype sdt, MPI_Datatype rdt,
			       MPI_Comm comm, bool nb, struct km_req *r)
{
	int fn = KM_ALLGATHERV + (nb ? KM_NFN : 0), kdt, ret;
	bool in_place = sbuf == MPI_IN_PLACE;
	struct km_mirror *m = km_vmove(fn, comm, in_place, sdt, rdt, &kdt);
	size_t *c, *d;

	if (!m)
		return KM_PASS;
	km_req_init(r, m, KM_ALLGATHERV, nb);
	c = km_sizes(rcounts, m->size);
	d = km_sizes(displs, m->size);
	if (!c || !d) {
		ret = -ENOMEM;
		goto out;
	}
	/* In place: this rank's block sits at its displacement in rbuf,
	 * which is kcoll's in-place form too. */
	if (in_place)
		sbuf = (char *)rbuf + d[m->rank] * coll_dtype_size(kdt);
	ret = coll_iallgatherv(sbuf, rbuf, c, d, kdt, m->kc, &r->creq);
out:
	free(c);
	free(d);
	return ret;
}

static int km_issue_redscatv(const void *sbuf, void *rbuf, const int *rcounts,
			     MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
			     bool nb, struct km_req *r)
{
	int fn = KM_REDSCATV + (nb ? KM_NFN : 0), kdt, kop, ret, i;
	struct km_mirror *m = km_red(fn, comm, 0, dt, op, &kdt, &kop);
	size_t *c, total = 0;

	if (!m)
		return KM_PASS;
	if (m->caps < 3) {
		km_count_mpi(fn, KM_W_OLD);
		return KM_PASS;
	}
	km_req_init(r, m, KM_REDSCATV, nb);
	c = km_sizes(rcounts, m->size);
	if (!c)
		return -ENOMEM;
	/* MPI_IN_PLACE: the input is rbuf, the result its first block;
	 * kcoll reads the input from a copy. */
	if (sbuf == MPI_IN_PLACE) {
		for (i = 0; i < m->size; i++)
			total += c[i];
		r->tmp_s = malloc(total * coll_dtype_size(kdt) + 1);
		if (!r->tmp_s) {
			free(c);
			return -ENOMEM;
		}
		memcpy(r->tmp_s, rbuf, total * coll_dtype_size(kdt));
		sbuf = r->tmp_s;
	}
	ret = coll_ireduce_scatterv(sbuf, rbuf, c, kdt, kop, m->kc, &r->creq);
	free(c);
	return ret;
}

static int km_issue_alltoallv(const void *sbuf, const int *scounts,
			      const int *sdispls, MPI_Datatype sdt, void *rbuf,
			      const int *rcounts, const int *rdispls,
			      MPI_Datatype rdt, MPI_Comm comm, bool nb,
			      struct km_req *r)
{
	int fn = KM_ALLTOALLV + (nb ? KM_NFN : 0), kdt, ret = -ENOMEM;
	bool in_place = sbuf == MPI_IN_PLACE;
	struct km_mirror *m = km_vmove(fn, comm, in_place, sdt, rdt, &kdt);
	size_t *sc = NULL, *sd = NULL, *rc = NULL, *rd = NULL, bytes;

	if (!m)
		return KM_PASS;
	km_req_init(r, m, KM_ALLTOALLV, nb);
	rc = km_sizes(rcounts, m->size);
	rd = km_sizes(rdispls, m->size);
	/* MPI_IN_PLACE: each block goes out from where the reply lands,
	 * so the data leaves from a copy of rbuf. */
	sc = km_sizes(in_place ? rcounts : scounts, m->size);
	sd = km_sizes(in_place ? rdispls : sdispls, m->size);
	if (!rc || !rd || !sc || !sd)
		goto out;
	if (in_place) {
		bytes = km_extent(rc, rd, m->size) * coll_dtype_size(kdt);
		r->tmp_s = malloc(bytes + 1);
		if (!r->tmp_s)
			goto out;
		memcpy(r->tmp_s, rbuf, bytes);
		sbuf = r->tmp_s;
	}
	ret = coll_ialltoallv(sbuf, sc, sd, rbuf, rc, rd, kdt, m->kc,
			      &r->creq);
out:
	free(sc);
	free(sd);
	free(rc);
	free(rd);
	return ret;
}

/*
 * Gather and scatter move bytes (kcoll's UINT8), so that whether a call
 * goes to kcoll depends on nothing any one rank alone sees: the root's
 * receive (gather) or send (scatter) arguments, which only it has, or
 * the types ranks may choose differently for the same data. Every rank of
 * a mirrored communicator takes the kcoll path; a block is @B bytes, from
 * the pair that means the same everywhere (the senders' of a gather, the
 * receivers' of a scatter; an in-place root has only the other). A side
 * whose type is one contiguous kcoll type is used in place, any other
 * (a derived type) is packed (unpacked) through a buffer by MPI_Pack.
 */
static struct km_mirror *km_rooted(int fn, MPI_Comm comm, int root,
				   int count, MPI_Datatype dt, size_t *B)
{
	struct km_mirror *m = km_find(comm);
	int tsize;

	if (!m) {
		km_count_mpi(fn, KM_W_COMM);
		return NULL;
	}
	if (m->caps < 2) {
		km_count_mpi(fn, KM_W_OLD);
		return NULL;
	}
	if (root < 0 || root >= m->size || count < 0 ||
	    PMPI_Type_size(dt, &tsize) != MPI_SUCCESS || tsize < 0) {
		km_count_mpi(fn, KM_W_SHAPE);
		return NULL;
	}
	*B = (size_t)count * (size_t)tsize;
	return m;
}

/* Bytes between blocks of @count @dt (its extent times @count), or 0. */
static size_t km_stride(int count, MPI_Datatype dt)
{
	MPI_Aint lb, extent;

	if (PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS ||
	    extent < 0)
		return 0;
	return (size_t)count * (size_t)extent;
}

/* Does @count of @dt lie in memory as @B bytes of one kcoll type? */
static bool km_flat(int count, MPI_Datatype dt, size_t B)
{
	int kdt = km_dtype(dt, false);

	return kdt >= 0 && count >= 0 &&
	       (size_t)count * coll_dtype_size(kdt) == B;
}

static int km_issue_gather(const void *sbuf, int scount, MPI_Datatype sdt,
			   void *rbuf, int rcount, MPI_Datatype rdt, int root,
			   MPI_Comm comm, bool nb, struct km_req *r)
{
	int fn = KM_GATHER + (nb ? KM_NFN : 0);
	bool in_place = sbuf == MPI_IN_PLACE, is_root;
	const void *send = sbuf;
	struct km_mirror *m;
	void *dst = NULL;
	size_t B, stride;

	m = in_place ? km_rooted(fn, comm, root, rcount, rdt, &B) :
		       km_rooted(fn, comm, root, scount, sdt, &B);
	if (!m)
		return KM_PASS;
	is_root = m->rank == root;
	in_place = in_place && is_root;
	km_req_init(r, m, KM_GATHER, nb);
	if (!in_place && !km_flat(scount, sdt, B)) {
		r->tmp_s = malloc(B + 1);
		if (!r->tmp_s)
			return -ENOMEM;
		if (!km_pack(sbuf, scount, sdt, r->tmp_s, B))
			return -EIO;
		send = r->tmp_s;
	}
	if (is_root) {
		stride = km_stride(rcount, rdt);
		if (km_flat(rcount, rdt, B)) {
			dst = rbuf;
		} else {
			/* Also where the root's receive pair does not
			 * hold B bytes a block: unpacking then fails
			 * (-EIO), where a direct receive would overrun. */
			r->tmp = malloc(B * (size_t)m->size + 1);
			if (!r->tmp)
				return -ENOMEM;
			dst = r->tmp;
			r->u_dst = rbuf;
			r->u_block = B;
			r->u_stride = stride;
			r->u_n = m->size;
			r->u_count = rcount;
			r->u_dt = rdt;
		}
		/* In place: the root's own block is at its place in rbuf;
		 * kcoll's in-place form wants it at its place in dst. */
		if (in_place && dst != rbuf &&
		    !km_pack((char *)rbuf + (size_t)root * stride, rcount, rdt,
			     (char *)dst + (size_t)root * B, B))
			return -EIO;
		if (in_place)
			send = (char *)dst + (size_t)root * B;
	}
	return coll_igather(send, dst, B, COLL_DTYPE_UINT8, root, m->kc,
			    &r->creq);
}

static int km_issue_scatter(const void *sbuf, int scount, MPI_Datatype sdt,
			    void *rbuf, int rcount, MPI_Datatype rdt, int root,
			    MPI_Comm comm, bool nb, struct km_req *r)
{
	int fn = KM_SCATTER + (nb ? KM_NFN : 0), j;
	bool in_place = rbuf == MPI_IN_PLACE, is_root;
	const void *src = NULL;
	struct km_mirror *m;
	void *dst = rbuf;
	size_t B, stride;

	m = in_place ? km_rooted(fn, comm, root, scount, sdt, &B) :
		       km_rooted(fn, comm, root, rcount, rdt, &B);
	if (!m)
		return KM_PASS;
	is_root = m->rank == root;
	in_place = in_place && is_root;
	km_req_init(r, m, KM_SCATTER, nb);
	if (is_root) {
		src = sbuf;
		if (!km_flat(scount, sdt, B)) {
			stride = km_stride(scount, sdt);
			r->tmp_s = malloc(B * (size_t)m->size + 1);
			if (!r->tmp_s)
				return -ENOMEM;
			for (j = 0; j < m->size; j++)
				if (!km_pack((const char *)sbuf + j * stride,
					     scount, sdt,
					     (char *)r->tmp_s + j * B, B))
					return -EIO;
			src = r->tmp_s;
		}
		/* In place: the root's own block stays where it is. */
		if (in_place)
			dst = (char *)src + (size_t)root * B;
	}
	if (!in_place && !km_flat(rcount, rdt, B)) {
		r->tmp = malloc(B + 1);
		if (!r->tmp)
			return -ENOMEM;
		dst = r->tmp;
		r->u_dst = rbuf;
		r->u_block = B;
		r->u_n = 1;
		r->u_count = rcount;
		r->u_dt = rdt;
	}
	return coll_iscatter(src, dst, B, COLL_DTYPE_UINT8, root, m->kc,
			     &r->creq);
}

static int km_issue_barrier(MPI_Comm comm, bool nb, struct km_req *r)
{
	int fn = KM_BARRIER + (nb ? KM_NFN : 0);
	struct km_mirror *m = km_find(comm);

	if (!m) {
		km_count_mpi(fn, KM_W_COMM);
		return KM_PASS;
	}
	km_req_init(r, m, KM_BARRIER, nb);
	return coll_ibarrier(m->kc, &r->creq);
}

/* ---------------------------------------------------------------- */
/* Blocking forms                                                    */
/* ---------------------------------------------------------------- */

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
		  MPI_Op op, MPI_Comm comm)
{
	struct km_req r = { 0 };
	int ret = km_issue_allreduce(sbuf, rbuf, count, dt, op, comm, false, &r);

	if (ret == KM_PASS)
		return PMPI_Allreduce(sbuf, rbuf, count, dt, op, comm);
	return km_block(&r, ret);
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
	       MPI_Op op, int root, MPI_Comm comm)
{
	struct km_req r = { 0 };
	int ret = km_issue_reduce(sbuf, rbuf, count, dt, op, root, comm, false,
				  &r);

	if (ret == KM_PASS)
		return PMPI_Reduce(sbuf, rbuf, count, dt, op, root, comm);
	return km_block(&r, ret);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
	struct km_req r = { 0 };
	int ret = km_issue_bcast(buf, count, dt, root, comm, false, &r);

	if (ret == KM_PASS)
		return PMPI_Bcast(buf, count, dt, root, comm);
	return km_block(&r, ret);
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
		  int rcount, MPI_Datatype rdt, MPI_Comm comm)
{
	struct km_req r = { 0 };
	int ret = km_issue_allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
				     false, &r);

	if (ret == KM_PASS)
		return PMPI_Allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm);
	return km_block(&r, ret);
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
			     MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
	struct km_req r = { 0 };
	int ret = km_issue_redscat(sbuf, rbuf, rcount, dt, op, comm, false, &r);

	if (ret == KM_PASS)
		return PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, dt, op, comm);
	return km_block(&r, ret);
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
		 int rcount, MPI_Datatype rdt, MPI_Comm comm)
{
	struct km_req r = { 0 };
	int ret = km_issue_alltoall(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
				    false, &r);

	if (ret == KM_PASS)
		return PMPI_Alltoall(sbuf, scount, sdt, rbuf, rcount, rdt, comm);
	return km_block(&r, ret);
}

int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
		   const int rcounts[], const int displs[], MPI_Datatype rdt,
		   MPI_Comm comm)
{
	struct km_req r = { 0 };
	int ret = km_issue_allgatherv(sbuf, rbuf, rcounts, displs, sdt, rdt,
				      comm, false, &r);

	if (ret == KM_PASS)
		return PMPI_Allgatherv(sbuf, scount, sdt, rbuf, rcounts, displs,
				       rdt, comm);
	return km_block(&r, ret);
}

int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[],
		       MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
	struct km_req r = { 0 };
	int ret = km_issue_redscatv(sbuf, rbuf, rcounts, dt, op, comm, false,
				    &r);

	if (ret == KM_PASS)
		return PMPI_Reduce_scatter(sbuf, rbuf, rcounts, dt, op, comm);
	return km_block(&r, ret);
}

int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[],
		  MPI_Datatype sdt, void *rbuf, const int rcounts[],
		  const int rdispls[], MPI_Datatype rdt, MPI_Comm comm)
{
	struct km_req r = { 0 };
	int ret = km_issue_alltoallv(sbuf, scounts, sdispls, sdt, rbuf,
				     rcounts, rdispls, rdt, comm, false, &r);

	if (ret == KM_PASS)
		return PMPI_Alltoallv(sbuf, scounts, sdispls, sdt, rbuf,
				      rcounts, rdispls, rdt, comm);
	return km_block(&r, ret);
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
	       int rcount, MPI_Datatype rdt, int root, MPI_Comm comm)
{
	struct km_req r = { 0 };
	int ret = km_issue_gather(sbuf, scount, sdt, rbuf, rcount, rdt, root,
				  comm, false, &r);

	if (ret == KM_PASS)
		return PMPI_Gather(sbuf, scount, sdt, rbuf, rcount, rdt, root,
				   comm);
	return km_block(&r, ret);
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
		int rcount, MPI_Datatype rdt, int root, MPI_Comm comm)
{
	struct km_req r = { 0 };
	int ret = km_issue_scatter(sbuf, scount, sdt, rbuf, rcount, rdt, root,
				   comm, false, &r);

	if (ret == KM_PASS)
		return PMPI_Scatter(sbuf, scount, sdt, rbuf, rcount, rdt, root,
				    comm);
	return km_block(&r, ret);
}

int MPI_Barrier(MPI_Comm comm)
{
	struct km_req r = { 0 };
	int ret = km_issue_barrier(comm, false, &r);

	if (ret == KM_PASS)
		return PMPI_Barrier(comm);
	return km_block(&r, ret);
}

/* ---------------------------------------------------------------- */
/* Non-blocking forms: MPI generalized requests                      */
/* ---------------------------------------------------------------- */

/*
 * A kcoll operation behind an MPI request the program can wait on with
 * any MPI completion call: MPI_Grequest_start() makes the request, and
 * the interposed MPI_Wait/Test families complete it (coll_wait() or
 * coll_test(), then MPI_Grequest_complete()) before handing the array to
 * MPI. No thread of ours: completion happens in the caller's thread, as
 * MPI_THREAD_SINGLE requires. Requests live on km.reqs until MPI frees
 * them (km_nb_free()).
 */
static int km_nb_query(void *state, MPI_Status *status)
{
	struct km_req *r = state;

	PMPI_Status_set_elements(status, MPI_BYTE, 0);
	PMPI_Status_set_cancelled(status, 0);
	status->MPI_SOURCE = MPI_UNDEFINED;
	status->MPI_TAG = MPI_UNDEFINED;
	status->MPI_ERROR = r->err ? MPI_ERR_OTHER : MPI_SUCCESS;
	return status->MPI_ERROR;
}

/*
 * @kc's MPI communicator is freed: the errors of the requests MPI still
 * holds in it go to MPI_COMM_WORLD's handler (km_fail()). Returns whether
 * there are any. Must hold km.lock.
 */
static bool km_kc_orphan_locked(const coll_comm *kc)
{
	struct km_req *r;
	bool held = false;

	for (r = km.reqs; r; r = r->next)
		if (r->kc == kc) {
			__atomic_store_n(&r->comm, MPI_COMM_NULL,
					 __ATOMIC_RELAXED);
			held = true;
		}
	return held;
}

static int km_nb_free(void *state)
{
	struct km_req *r = state, **pp;
	struct km_zombie *z, **zp;
	coll_comm *dead = NULL;

	pthread_mutex_lock(&km.lock);
	for (pp = &km.reqs; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	pthread_mutex_unlock(&km.lock);
	coll_request_free(r->creq);
	/* The last request of a communicator MPI freed: it goes now. */
	pthread_mutex_lock(&km.lock);
	for (zp = &km.zombies; (z = *zp); zp = &z->next)
		if (z->kc == r->kc) {
			/* A zombie's requests are orphaned already. */
			if (!km_kc_orphan_locked(z->kc)) {
				*zp = z->next;
				dead = z->kc;
				free(z);
			}
			break;
		}
	pthread_mutex_unlock(&km.lock);
	if (dead)
		coll_comm_destroy(dead);
	free(r);
	return MPI_SUCCESS;
}

/*
 * MPI_Finalize with requests of ours MPI still holds (the program never
 * completed them, which MPI forbids): their kcoll requests go with the
 * communicators, so none may be touched later; MPI may still call
 * km_nb_free() for them.
 */
static void km_nb_finalize(void)
{
	struct km_req *r;

	pthread_mutex_lock(&km.lock);
	for (r = km.reqs; r; r = r->next) {
		coll_request_free(r->creq);
		r->creq = NULL;
		r->kc = NULL;
	}
	pthread_mutex_unlock(&km.lock);
}

/* Cancelling a non-blocking collective is erroneous (MPI 3.1, section
 * 5.12); Open MPI's own refuse with MPI_ERR_REQUEST: so do we. */
static int km_nb_cancel(void *state, int complete)
{
	(void)state;
	(void)complete;
	return MPI_ERR_REQUEST;
}

static int km_nb_start(struct km_req *r, int ret, MPI_Request *request)
{
	int rc;

	if (ret < 0) {
		km_req_tmp_free(r);
		rc = km_fail(r, ret);
		free(r);
		return rc;
	}
	rc = PMPI_Grequest_start(km_nb_query, km_nb_free, km_nb_cancel, r,
				 &r->mreq);
	if (rc != MPI_SUCCESS) {
		/* The operation runs on; wait for it rather than leak it. */
		km_req_done(r, coll_wait(r->creq));
		coll_request_free(r->creq);
		free(r);
		return rc;
	}
	*request = r->mreq;
	pthread_mutex_lock(&km.lock);
	r->next = km.reqs;
	km.reqs = r;
	pthread_mutex_unlock(&km.lock);
	return MPI_SUCCESS;
}

static struct km_req *km_nb_find(MPI_Request req)
{
	struct km_req *r;

	if (req == MPI_REQUEST_NULL)
		return NULL;
	pthread_mutex_lock(&km.lock);
	for (r = km.reqs; r; r = r->next)
		if (r->mreq == req)
			break;
	pthread_mutex_unlock(&km.lock);
	return r;
}

/* Complete @req in MPI if it is ours and its operation is done (@wait:
 * wait for it). Returns whether it is ours and still in flight. */
static bool km_nb_progress(MPI_Request req, bool wait)
{
	struct km_req *r = km_nb_find(req);
	int done = 0, err;

	if (!r || r->done)
		return false;
	if (wait) {
		err = coll_wait(r->creq);
		done = 1;
	} else {
		err = coll_test(r->creq, &done);
	}
	if (!done)
		return true;
	km_req_done(r, err);
	if (r->err)
		km_fail(r, r->err);
	PMPI_Grequest_complete(r->mreq);
	return false;
}

static int km_nb_alloc(struct km_req **r)
{
	*r = calloc(1, sizeof(**r));
	return *r ? 0 : -ENOMEM;
}

#define KM_NB(call, pmpi_call)						\
	do {								\
		struct km_req *r;					\
		int ret;						\
									\
		if (km_nb_alloc(&r))					\
			return pmpi_call;				\
		ret = call;						\
		if (ret == KM_PASS) {					\
			free(r);					\
			return pmpi_call;				\
		}							\
		return km_nb_start(r, ret, request);			\
	} while (0)

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
		   MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
	KM_NB(km_issue_allreduce(sbuf, rbuf, count, dt, op, comm, true, r),
	      PMPI_Iallreduce(sbuf, rbuf, count, dt, op, comm, request));
}

int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
		MPI_Op op, int root, MPI_Comm comm, MPI_Request *request)
{
	KM_NB(km_issue_reduce(sbuf, rbuf, count, dt, op, root, comm, true, r),
	      PMPI_Ireduce(sbuf, rbuf, count, dt, op, root, comm, request));
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm,
	       MPI_Request *request)
{
	KM_NB(km_issue_bcast(buf, count, dt, root, comm, true, r),
	      PMPI_Ibcast(buf, count, dt, root, comm, request));
}

int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
		   int rcount, MPI_Datatype rdt, MPI_Comm comm,
		   MPI_Request *request)
{
	KM_NB(km_issue_allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
				 true, r),
	      PMPI_Iallgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
			      request));
}

int MPI_Ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
			      MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
			      MPI_Request *request)
{
	KM_NB(km_issue_redscat(sbuf, rbuf, rcount, dt, op, comm, true, r),
	      PMPI_Ireduce_scatter_block(sbuf, rbuf, rcount, dt, op, comm,
					 request));
}

int MPI_Ialltoall(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
		  int rcount, MPI_Datatype rdt, MPI_Comm comm,
		  MPI_Request *request)
{
	KM_NB(km_issue_alltoall(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
				true, r),
	      PMPI_Ialltoall(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
			     request));
}

int MPI_Iallgatherv(const void *sbuf, int scount, MPI_Datatype sdt,
		    void *rbuf, const int rcounts[], const int displs[],
		    MPI_Datatype rdt, MPI_Comm comm, MPI_Request *request)
{
	KM_NB(km_issue_allgatherv(sbuf, rbuf, rcounts, displs, sdt, rdt, comm,
				  true, r),
	      PMPI_Iallgatherv(sbuf, scount, sdt, rbuf, rcounts, displs, rdt,
			       comm, request));
}

int MPI_Ireduce_scatter(const void *sbuf, void *rbuf, const int rcounts[],
			MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
			MPI_Request *request)
{
	KM_NB(km_issue_redscatv(sbuf, rbuf, rcounts, dt, op, comm, true, r),
	      PMPI_Ireduce_scatter(sbuf, rbuf, rcounts, dt, op, comm, request));
}

int MPI_Ialltoallv(const void *sbuf, const int scounts[], const int sdispls[],
		   MPI_Datatype sdt, void *rbuf, const int rcounts[],
		   const int rdispls[], MPI_Datatype rdt, MPI_Comm comm,
		   MPI_Request *request)
{
	KM_NB(km_issue_alltoallv(sbuf, scounts, sdispls, sdt, rbuf, rcounts,
				 rdispls, rdt, comm, true, r),
	      PMPI_Ialltoallv(sbuf, scounts, sdispls, sdt, rbuf, rcounts,
			      rdispls, rdt, comm, request));
}

int MPI_Igather(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
		int rcount, MPI_Datatype rdt, int root, MPI_Comm comm,
		MPI_Request *request)
{
	KM_NB(km_issue_gather(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm,
			      true, r),
	      PMPI_Igather(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm,
			   request));
}

int MPI_Iscatter(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
		 int rcount, MPI_Datatype rdt, int root, MPI_Comm comm,
		 MPI_Request *request)
{
	KM_NB(km_issue_scatter(sbuf, scount, sdt, rbuf, rcount, rdt, root,
			       comm, true, r),
	      PMPI_Iscatter(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm,
			    request));
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
	KM_NB(km_issue_barrier(comm, true, r), PMPI_Ibarrier(comm, request));
}

/* ---------------------------------------------------------------- */
/* Completion calls: ours are completed first, then MPI takes over   */
/* ---------------------------------------------------------------- */

static bool km_any_ours(void)
{
	return __atomic_load_n(&km.reqs, __ATOMIC_RELAXED) != NULL;
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
	if (km_any_ours() && request)
		km_nb_progress(*request, true);
	return PMPI_Wait(request, status);
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
	if (km_any_ours() && request)
		km_nb_progress(*request, false);
	return PMPI_Test(request, flag, status);
}

/*
 * MPI forbids freeing a non-blocking collective's request before it
 * completes (MPI 3.1, section 5.12), and Open MPI's own refuse with
 * MPI_ERR_REQUEST: so do we, leaving the request to be waited for. Freed,
 * it would never be completed (only MPI_Wait/Test on it complete ours),
 * its result never unpacked, its memory never returned. One that has
 * finished is completed here and freed by MPI.
 */
int MPI_Request_free(MPI_Request *request)
{
	struct km_req *r;

	if (!km_any_ours() || !request || !(r = km_nb_find(*request)) ||
	    !km_nb_progress(*request, false))
		return PMPI_Request_free(request);
	fprintf(stderr, "kcoll-mpi: MPI_Request_free on rank %d: its %s is still in flight; a non-blocking collective's request is completed by MPI_Wait or MPI_Test, not freed\n",
		r->rank, km_fn_name[r->fn]);
	PMPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_REQUEST);
	return MPI_ERR_REQUEST;
}

/* Complete (@wait: wait for) every request of ours in @reqs. */
static void km_nb_progress_all(int n, MPI_Request reqs[], bool wait)
{
	int i;

	if (km_any_ours() && reqs)
		for (i = 0; i < n; i++)
			km_nb_progress(reqs[i], wait);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
	km_nb_progress_all(n, reqs, true);
	return PMPI_Waitall(n, reqs, statuses);
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
	km_nb_progress_all(n, reqs, false);
	return PMPI_Testall(n, reqs, flag, statuses);
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag,
		MPI_Status *status)
{
	km_nb_progress_all(n, reqs, false);
	return PMPI_Testany(n, reqs, index, flag, status);
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[],
		 MPI_Status statuses[])
{
	km_nb_progress_all(n, reqs, false);
	return PMPI_Testsome(n, reqs, outcount, indices, statuses);
}

/*
 * Waitany and Waitsome over a mix: MPI alone would never see ours
 * complete (only we complete them), so poll both, backing off to 1 ms
 * sleeps: a wait on kcoll alone would miss MPI's requests, a wait on MPI
 * alone ours.
 */
static bool km_nb_mixed(int n, MPI_Request reqs[])
{
	bool inflight = false;
	int i;

	for (i = 0; i < n; i++)
		inflight |= km_nb_progress(reqs[i], false);
	return inflight;
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
	int flag = 0, rc, spins = 0;

	if (!km_any_ours() || !reqs || !km_nb_mixed(n, reqs))
		return PMPI_Waitany(n, reqs, index, status);
	for (;;) {
		rc = PMPI_Testany(n, reqs, index, &flag, status);
		if (rc != MPI_SUCCESS || flag)
			return rc;
		if (!km_nb_mixed(n, reqs))
			return PMPI_Waitany(n, reqs, index, status);
		if (++spins > 100)
			usleep(1000);
	}
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[],
		 MPI_Status statuses[])
{
	int rc, spins = 0;

	if (!km_any_ours() || !reqs || !km_nb_mixed(n, reqs))
		return PMPI_Waitsome(n, reqs, outcount, indices, statuses);
	for (;;) {
		rc = PMPI_Testsome(n, reqs, outcount, indices, statuses);
		if (rc != MPI_SUCCESS || *outcount)
			return rc;
		if (!km_nb_mixed(n, reqs))
			return PMPI_Waitsome(n, reqs, outcount, indices, statuses);
		if (++spins > 100)
			usleep(1000);
	}
}

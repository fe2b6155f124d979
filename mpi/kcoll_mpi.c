// SPDX-License-Identifier: MIT
/*
 * libkcoll-mpi: run an unmodified MPI program's collectives through kcoll.
 *
 *   LD_PRELOAD=libkcoll-mpi.so mpirun ... ./program     (or -x LD_PRELOAD)
 *
 * The MPI profiling interface: this library defines MPI_Allreduce & co.
 * and reaches the real MPI through PMPI_*. It mirrors MPI_COMM_WORLD (at
 * MPI_Init) and every communicator derived from a mirrored one with
 * MPI_Comm_dup, _dup_with_info, _split, _split_type or _create: a kcoll
 * communicator of the same ranks, bootstrapped through MPI itself (rank 0's
 * unique id goes out with PMPI_Bcast). A call on a mirrored communicator
 * with a contiguous predefined datatype kcoll has and a predefined
 * reduction (SUM, PROD, MIN, MAX) runs through kcoll; everything else
 * (other datatypes and ops, MPI_Allgather with different send and receive
 * types, inter-communicators, non-blocking forms) goes to the real MPI
 * unchanged. Whether a communicator is mirrored is agreed by all of its
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
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <mpi.h>
#include <coll.h>

#define KM_MAX_COMMS	256

struct km_mirror {
	MPI_Comm comm;
	coll_comm *kc;
	int rank, size;
};

enum km_fn {
	KM_ALLREDUCE, KM_REDUCE, KM_BCAST, KM_ALLGATHER, KM_REDSCAT,
	KM_ALLTOALL, KM_BARRIER, KM_NFN
};

static const char *const km_fn_name[KM_NFN] = {
	"MPI_Allreduce", "MPI_Reduce", "MPI_Bcast", "MPI_Allgather",
	"MPI_Reduce_scatter_block", "MPI_Alltoall", "MPI_Barrier",
};

/* Why a call went to MPI. */
enum km_why {
	KM_W_COMM, KM_W_DTYPE, KM_W_OP, KM_W_SHAPE, KM_W_NWHY
};

static const char *const km_why_name[KM_W_NWHY] = {
	"communicator not mirrored", "datatype", "reduction", "arguments",
};

static struct {
	pthread_mutex_t lock;
	struct km_mirror m[KM_MAX_COMMS];
	int n;
	bool off, verbose, stats;
	unsigned long kc[KM_NFN], mpi[KM_NFN][KM_W_NWHY], err[KM_NFN];
	unsigned long mirrored, refused;
} km = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void km_count_mpi(enum km_fn fn, enum km_why why)
{
	__atomic_fetch_add(&km.mpi[fn][why], 1, __ATOMIC_RELAXED);
}

static struct km_mirror *km_find(MPI_Comm comm)
{
	struct km_mirror *r = NULL;
	int i;

	if (comm == MPI_COMM_NULL)
		return NULL;
	pthread_mutex_lock(&km.lock);
	for (i = 0; i < km.n; i++)
		if (km.m[i].comm == comm) {
			r = &km.m[i];
			break;
		}
	pthread_mutex_unlock(&km.lock);
	return r;
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
static void km_mirror(MPI_Comm comm)
{
	coll_unique_id id;
	coll_comm *kc = NULL;
	int rank, size, inter = 0, ok, all, err = 0;

	if (km.off || comm == MPI_COMM_NULL)
		return;
	if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter)
		return;
	PMPI_Comm_rank(comm, &rank);
	PMPI_Comm_size(comm, &size);
	pthread_mutex_lock(&km.lock);
	ok = km.n < KM_MAX_COMMS && km_local_ok();
	pthread_mutex_unlock(&km.lock);
	PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
	if (!all) {
		if (km.verbose && !rank)
			fprintf(stderr, "kcoll-mpi: a communicator of %d ranks is not mirrored: /dev/kcoll is missing on a rank, or too many communicators\n",
				size);
		km.refused++;
		return;
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
		return;
	}
	PMPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, comm);
	err = coll_comm_init_rank(&kc, size, &id, rank);
	ok = !err;
	if (err && km.verbose)
		fprintf(stderr, "kcoll-mpi: rank %d: coll_comm_init_rank: %s (%s)\n",
			rank, coll_strerror(err), coll_last_error());
	PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
	if (!all) {
		if (kc)
			coll_comm_abort(kc);
		km.refused++;
		return;
	}
	pthread_mutex_lock(&km.lock);
	km.m[km.n++] = (struct km_mirror){ comm, kc, rank, size };
	km.mirrored++;
	pthread_mutex_unlock(&km.lock);
}

static void km_unmirror(MPI_Comm comm)
{
	coll_comm *kc = NULL;
	int i;

	pthread_mutex_lock(&km.lock);
	for (i = 0; i < km.n; i++)
		if (km.m[i].comm == comm) {
			kc = km.m[i].kc;
			km.m[i] = km.m[--km.n];
			break;
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

int MPI_Finalize(void)
{
	int i, w, rank = -1;

	PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (km.stats) {
		char line[2048];
		int o;

		o = snprintf(line, sizeof(line), "kcoll-mpi: rank %d: %lu communicator(s) mirrored, %lu not;",
			     rank, km.mirrored, km.refused);
		for (i = 0; i < KM_NFN; i++) {
			unsigned long m = 0;

			for (w = 0; w < KM_W_NWHY; w++)
				m += km.mpi[i][w];
			if (!km.kc[i] && !m)
				continue;
			o += snprintf(line + o, sizeof(line) - o, " %s %lu kcoll%s, %lu mpi",
				      km_fn_name[i], km.kc[i],
				      km.err[i] ? " (some failed)" : "", m);
			for (w = 0; w < KM_W_NWHY; w++)
				if (km.mpi[i][w])
					o += snprintf(line + o, sizeof(line) - o, " (%s %lu)",
						      km_why_name[w], km.mpi[i][w]);
			o += snprintf(line + o, sizeof(line) - o, ";");
			if (o >= (int)sizeof(line))
				break;
		}
		fprintf(stderr, "%s\n", line);
	}
	while (km.n)
		km_unmirror(km.m[km.n - 1].comm);
	return PMPI_Finalize();
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_dup(comm, newcomm);

	if (rc == MPI_SUCCESS && km_find(comm))
		km_mirror(*newcomm);
	return rc;
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_dup_with_info(comm, info, newcomm);

	if (rc == MPI_SUCCESS && km_find(comm))
		km_mirror(*newcomm);
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

	if (rc == MPI_SUCCESS && km_find(comm) && *newcomm != MPI_COMM_NULL)
		km_mirror(*newcomm);
	return rc;
}

int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info,
			MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_split_type(comm, type, key, info, newcomm);

	if (rc == MPI_SUCCESS && km_find(comm) && *newcomm != MPI_COMM_NULL)
		km_mirror(*newcomm);
	return rc;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_create(comm, group, newcomm);

	if (rc == MPI_SUCCESS && km_find(comm) && *newcomm != MPI_COMM_NULL)
		km_mirror(*newcomm);
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
 * A kcoll failure inside a call MPI promised to complete: the mirror's
 * ranks may now be out of step, so there is no safe fallback. Report it
 * the MPI way: the communicator's error handler (by default, abort).
 */
static int km_fail(struct km_mirror *m, enum km_fn fn, int err)
{
	char msg[600];

	__atomic_fetch_add(&km.err[fn], 1, __ATOMIC_RELAXED);
	snprintf(msg, sizeof(msg), "kcoll-mpi: %s on rank %d failed: %s (%s)",
		 km_fn_name[fn], m->rank, coll_strerror(err), coll_last_error());
	fprintf(stderr, "%s\n", msg);
	return PMPI_Comm_call_errhandler(m->comm, MPI_ERR_OTHER) ?: MPI_ERR_OTHER;
}

/* Mirror, kcoll dtype and op for a reduction; NULL (counted) if it goes
 * to MPI. */
static struct km_mirror *km_red(enum km_fn fn, MPI_Comm comm, int count,
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

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
		  MPI_Op op, MPI_Comm comm)
{
	struct km_mirror *m;
	int kdt, kop, err;

	m = km_red(KM_ALLREDUCE, comm, count, dt, op, &kdt, &kop);
	if (!m)
		return PMPI_Allreduce(sbuf, rbuf, count, dt, op, comm);
	if (sbuf == MPI_IN_PLACE)
		sbuf = rbuf;
	err = coll_allreduce(sbuf, rbuf, (size_t)count, kdt, kop, m->kc);
	if (err)
		return km_fail(m, KM_ALLREDUCE, err);
	__atomic_fetch_add(&km.kc[KM_ALLREDUCE], 1, __ATOMIC_RELAXED);
	return MPI_SUCCESS;
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
	       MPI_Op op, int root, MPI_Comm comm)
{
	struct km_mirror *m;
	int kdt, kop, err;

	m = km_red(KM_REDUCE, comm, count, dt, op, &kdt, &kop);
	if (m && (root < 0 || root >= m->size)) {
		km_count_mpi(KM_REDUCE, KM_W_SHAPE);
		m = NULL;
	}
	if (!m)
		return PMPI_Reduce(sbuf, rbuf, count, dt, op, root, comm);
	if (sbuf == MPI_IN_PLACE)
		sbuf = rbuf;
	err = coll_reduce(sbuf, m->rank == root ? rbuf : NULL, (size_t)count,
			  kdt, kop, root, m->kc);
	if (err)
		return km_fail(m, KM_REDUCE, err);
	__atomic_fetch_add(&km.kc[KM_REDUCE], 1, __ATOMIC_RELAXED);
	return MPI_SUCCESS;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
	struct km_mirror *m = km_find(comm);
	int kdt, err;

	if (!m) {
		km_count_mpi(KM_BCAST, KM_W_COMM);
		return PMPI_Bcast(buf, count, dt, root, comm);
	}
	kdt = km_dtype(dt, false);
	if (kdt < 0 || count < 0 || root < 0 || root >= m->size) {
		km_count_mpi(KM_BCAST, kdt < 0 ? KM_W_DTYPE : KM_W_SHAPE);
		return PMPI_Bcast(buf, count, dt, root, comm);
	}
	err = coll_broadcast(buf, buf, (size_t)count, kdt, root, m->kc);
	if (err)
		return km_fail(m, KM_BCAST, err);
	__atomic_fetch_add(&km.kc[KM_BCAST], 1, __ATOMIC_RELAXED);
	return MPI_SUCCESS;
}

/* The shape of an allgather/alltoall: one datatype and one count each
 * way (MPI allows matching type signatures; kcoll needs the same). */
static struct km_mirror *km_move(enum km_fn fn, MPI_Comm comm, bool in_place,
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

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
		  int rcount, MPI_Datatype rdt, MPI_Comm comm)
{
	bool in_place = sbuf == MPI_IN_PLACE;
	struct km_mirror *m;
	int kdt, err;

	m = km_move(KM_ALLGATHER, comm, in_place, scount, sdt, rcount, rdt, &kdt);
	if (!m)
		return PMPI_Allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm);
	/* In place: this rank's block already sits at its place in rbuf,
	 * which is kcoll's in-place form too. */
	if (in_place)
		sbuf = (char *)rbuf + (size_t)m->rank * (size_t)rcount *
				      coll_dtype_size(kdt);
	err = coll_allgather(sbuf, rbuf, (size_t)rcount, kdt, m->kc);
	if (err)
		return km_fail(m, KM_ALLGATHER, err);
	__atomic_fetch_add(&km.kc[KM_ALLGATHER], 1, __ATOMIC_RELAXED);
	return MPI_SUCCESS;
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
			     MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
	struct km_mirror *m;
	int kdt, kop, err;
	size_t bytes;

	m = km_red(KM_REDSCAT, comm, rcount, dt, op, &kdt, &kop);
	if (!m)
		return PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, dt, op, comm);
	bytes = (size_t)rcount * coll_dtype_size(kdt);
	if (sbuf == MPI_IN_PLACE) {
		/* MPI: the input is rbuf, the result goes to its first
		 * block. kcoll's in-place result is block @rank: move it. */
		char *own = (char *)rbuf + (size_t)m->rank * bytes;

		err = coll_reduce_scatter(rbuf, own, (size_t)rcount, kdt, kop,
					  m->kc);
		if (!err && m->rank)
			memmove(rbuf, own, bytes);
	} else {
		err = coll_reduce_scatter(sbuf, rbuf, (size_t)rcount, kdt, kop,
					  m->kc);
	}
	if (err)
		return km_fail(m, KM_REDSCAT, err);
	__atomic_fetch_add(&km.kc[KM_REDSCAT], 1, __ATOMIC_RELAXED);
	return MPI_SUCCESS;
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
		 int rcount, MPI_Datatype rdt, MPI_Comm comm)
{
	bool in_place = sbuf == MPI_IN_PLACE;
	struct km_mirror *m;
	int kdt, err;

	m = km_move(KM_ALLTOALL, comm, in_place, scount, sdt, rcount, rdt, &kdt);
	if (!m)
		return PMPI_Alltoall(sbuf, scount, sdt, rbuf, rcount, rdt, comm);
	err = coll_alltoall(in_place ? rbuf : sbuf, rbuf, (size_t)rcount, kdt,
			    m->kc);
	if (err)
		return km_fail(m, KM_ALLTOALL, err);
	__atomic_fetch_add(&km.kc[KM_ALLTOALL], 1, __ATOMIC_RELAXED);
	return MPI_SUCCESS;
}

int MPI_Barrier(MPI_Comm comm)
{
	struct km_mirror *m = km_find(comm);
	int err;

	if (!m) {
		km_count_mpi(KM_BARRIER, KM_W_COMM);
		return PMPI_Barrier(comm);
	}
	err = coll_barrier(m->kc);
	if (err)
		return km_fail(m, KM_BARRIER, err);
	__atomic_fetch_add(&km.kc[KM_BARRIER], 1, __ATOMIC_RELAXED);
	return MPI_SUCCESS;
}

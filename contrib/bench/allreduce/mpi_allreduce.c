/* mpi_allreduce -- the MPI anchor of the all-reduce benchmark: times
 * MPI_Allreduce (float32, MPI_SUM, in place) for the sizes given.
 *
 *   mpirun -np N [--mca btl tcp,self | --mca btl vader,self] \
 *       mpi_allreduce [-l LABEL] BYTES...
 *
 * For every size: warm-up, a barrier, then iterations timed; the time per
 * call is the slowest rank's mean. Rank 0 prints one line per size:
 * "RESULT <label, default mpi> <n> <bytes> <seconds per call> <iterations>".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_iters.h"

int main(int argc, char **argv)
{
    int rank, n, a = 1;
    const char *label = "mpi";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (argc > 2 && strcmp(argv[1], "-l") == 0) {
        label = argv[2];
        a = 3;
    }
    for (; a < argc; a++) {
        size_t bytes = (size_t)strtoull(argv[a], NULL, 10);
        size_t count = bytes / sizeof(float);
        float *buf = malloc(count * sizeof(float));
        if (buf == NULL || count == 0)
            MPI_Abort(MPI_COMM_WORLD, 2);
        for (size_t i = 0; i < count; i++)
            buf[i] = (float)((i + (size_t)rank) % 7);
        int iters, warm;
        bench_iters(bytes, n, &iters, &warm);
        for (int k = 0; k < warm; k++)
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int k = 0; k < iters; k++)
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD);
        double t = (MPI_Wtime() - t0) / iters, tmax = 0;
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("RESULT %s %d %zu %.9f %d\n", label, n, bytes, tmax,
                   iters);
        fflush(stdout);
        free(buf);
    }
    MPI_Finalize();
    return 0;
}

/* How strata launch hands each task its keys without a directory on disk
 * (nothing to leave behind when launch is killed, even by -9): one sealed
 * memfd per task, inherited across exec, named by the environment:
 *
 *     STRATA_LAUNCH_KEYS_FD=<fd>
 *
 * holding, as a key directory would, every task's public certificate and
 * this task's secret one, each a record
 *
 *     "strata-key " NAME " " LEN "\n"  then LEN bytes of certificate
 *
 * with NAME the file name it would have in a key directory
 * (worker-1.key, worker-1.key_secret). The kernel frees the memfd with its
 * last holder. Header-only: the strata command writes it, libstrata reads
 * it (core/cluster/keys.c). */
#ifndef STRATA_CORE_KEYBUNDLE_H
#define STRATA_CORE_KEYBUNDLE_H

#define STRATA__KEYS_FD_ENV   "STRATA_LAUNCH_KEYS_FD"
#define STRATA__KEYS_REC      "strata-key %s %zu\n"
#define STRATA__KEYS_REC_SCAN "strata-key %95s %zu"

#endif /* STRATA_CORE_KEYBUNDLE_H */

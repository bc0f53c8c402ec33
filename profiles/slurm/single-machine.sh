#!/usr/bin/env bash
# A real single-machine SLURM cluster, to run `snakemake --profile profiles/slurm` for real
# before a real cluster does (and for `pytest -m cluster`, tests/workflow/test_slurm_workflow.py).
#
#   sudo bash profiles/slurm/single-machine.sh          # install (Debian/Ubuntu) and start
#   sudo bash profiles/slurm/single-machine.sh stop     # stop every daemon it started
#
# It installs Debian's SLURM (slurm-wlm 22.05 on Debian 12) with munge (authentication),
# slurmdbd and MariaDB (job accounting: `sacct`, which real clusters have and the test reads,
# needs a database), writes a slurm.conf for this host (one node, one
# partition `debug`, this machine's cores and memory less 2 GB; cluster `drmas`, account
# `drmas` for the calling user) and starts munged, MariaDB, slurmdbd, slurmctld and slurmd.
# The daemons run as root: this is a test cluster on one machine, not a shared one.
# Re-running it restarts the daemons with a fresh configuration; job history is kept.
set -euo pipefail

CLUSTER=drmas ACCOUNT=drmas PARTITION=debug
CONF=/etc/slurm STATE=/var/spool/slurmctld SPOOL=/var/spool/slurmd LOGS=/var/log/slurm
USER_NAME=${SUDO_USER:-$(id -un)}

log() { printf 'single-machine SLURM: %s\n' "$*"; }
die() { printf 'single-machine SLURM: error: %s\n' "$*" >&2; exit 1; }

stop_daemons() {
    pkill -x slurmd 2>/dev/null || true
    pkill -x slurmctld 2>/dev/null || true
    pkill -x slurmdbd 2>/dev/null || true
    for _ in $(seq 50); do
        pgrep -x slurmd >/dev/null || pgrep -x slurmctld >/dev/null || pgrep -x slurmdbd >/dev/null || break
        sleep 0.2
    done
}

if [[ ${1:-start} == stop ]]; then
    stop_daemons
    pkill -x mariadbd 2>/dev/null || true
    pkill -x munged 2>/dev/null || true
    log "stopped"
    exit 0
fi
[[ $(id -u) == 0 ]] || die "run as root (sudo): it installs packages and starts system daemons"

wait_for() {   # wait_for SECONDS WHAT COMMAND...: poll until COMMAND succeeds
    local limit=$1 what=$2; shift 2
    for _ in $(seq $((limit * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
    die "$what did not come up within ${limit}s (logs: $LOGS)"
}

# -- packages ------------------------------------------------------------------------------
PACKAGES="slurm-wlm slurmdbd munge mariadb-server"
if ! command -v slurmctld >/dev/null || ! command -v slurmdbd >/dev/null \
        || ! command -v munged >/dev/null || ! command -v mariadbd >/dev/null; then
    command -v apt-get >/dev/null || die "no apt-get: install $PACKAGES with your package manager"
    log "installing $PACKAGES"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q $PACKAGES >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null && apt-get install -y -q $PACKAGES >/dev/null; } \
        || die "apt-get could not install $PACKAGES"
fi

stop_daemons
mkdir -p "$CONF" "$STATE" "$SPOOL" "$LOGS" /run/munge /run/mysqld /run/slurm

# -- munge: every SLURM message is signed with this host's key -----------------------------
[[ -s /etc/munge/munge.key ]] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
chown munge:munge /etc/munge/munge.key /run/munge && chmod 400 /etc/munge/munge.key
if ! pgrep -x munged >/dev/null; then
    runuser -u munge -- /usr/sbin/munged
fi
wait_for 10 munged bash -c 'munge -n | unmunge'

# -- MariaDB: the accounting database of slurmdbd --------------------------------------------
chown mysql:mysql /run/mysqld
if ! pgrep -x mariadbd >/dev/null; then
    [[ -d /var/lib/mysql/mysql ]] || mariadb-install-db --user=mysql >/dev/null
    (setsid mariadbd --user=mysql >"$LOGS/mariadb.log" 2>&1 &)
fi
wait_for 60 MariaDB mariadb -e 'SELECT 1'
DB_PASS=$(cat "$CONF/.dbpass" 2>/dev/null || head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$DB_PASS" > "$CONF/.dbpass" && chmod 600 "$CONF/.dbpass"
mariadb -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
            ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
            GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"

# -- configuration ---------------------------------------------------------------------------
HOST=$(hostname -s)
CPUS=$(nproc)
MEM_MB=$(( $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) - 2048 ))
cat > "$CONF/slurmdbd.conf" <<EOF
# Written by profiles/slurm/single-machine.sh
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
LogFile=$LOGS/slurmdbd.log
PidFile=/run/slurm/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
chmod 600 "$CONF/slurmdbd.conf"
cat > "$CONF/slurm.conf" <<EOF
# Written by profiles/slurm/single-machine.sh: one node ($HOST, $CPUS CPUs, $MEM_MB MB), one partition.
ClusterName=$CLUSTER
SlurmctldHost=$HOST
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
# No cgroups: containers rarely delegate them; processes are tracked by their parent ids.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageEnforce=associations
# Keep each job's --comment (the executor writes rule_<rule>_wildcards_<values> there).
AccountingStoreFlags=job_comment
# Finished jobs stay visible to squeue for 5 minutes (sacct keeps them for good).
MinJobAge=300
KillWait=10
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF

# -- daemons and the accounting records (cluster, account, user) ------------------------------
slurmdbd
wait_for 30 slurmdbd sacctmgr -n list cluster
sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true
sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description="drmas test" Organization=drmas >/dev/null 2>&1 || true
for u in root "$USER_NAME"; do
    sacctmgr -i add user "$u" Account="$ACCOUNT" Cluster="$CLUSTER" >/dev/null 2>&1 || true
done
slurmctld
wait_for 30 slurmctld scontrol ping
slurmd
wait_for 30 "node $HOST" bash -c "sinfo -h -n $HOST -o %T | grep -q -E '^(idle|mixed|allocated)'"
log "up: cluster $CLUSTER, partition $PARTITION, node $HOST ($CPUS CPUs, $MEM_MB MB), account $ACCOUNT"
log "try: srun -A $ACCOUNT -p $PARTITION hostname"

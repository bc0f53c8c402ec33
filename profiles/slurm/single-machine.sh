#!/usr/bin/env bash
# A real single-machine SLURM cluster, to run `snakemake --profile profiles/slurm` for real
# before a real cluster does (and for `pytest -m cluster`, tests/workflow/test_slurm_workflow.py).
#
#   sudo bash profiles/slurm/single-machine.sh          # install (Debian/Ubuntu) and start
#   sudo bash profiles/slurm/single-machine.sh stop     # stop every daemon it started
#
# It stops only what it started: the pid of every daemon it starts is kept in $PIDDIR
# (/run/drmas-slurm), and `stop` signals those pids alone (and only while the pid still
# runs that daemon). It refuses to start beside a munged, MariaDB or SLURM daemon it did not
# start (a machine's own cluster or database), naming it.
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
PIDDIR=${DRMAS_SLURM_PIDDIR:-/run/drmas-slurm}
DAEMONS="slurmd slurmctld slurmdbd mariadbd munged"    # in the order they are stopped

log() { printf 'single-machine SLURM: %s\n' "$*"; }
die() { printf 'single-machine SLURM: error: %s\n' "$*" >&2; exit 1; }

ours() {   # ours NAME: the pid this script started NAME as, if that pid still runs NAME
    local pid
    pid=$(cat "$PIDDIR/$1.pid" 2>/dev/null) || return 1
    [[ $pid =~ ^[0-9]+$ ]] && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$1" ]] || return 1
    echo "$pid"
}

record() {   # record NAME PIDFILE: keep the pid of the NAME just started (from its own pid file)
    mkdir -p "$PIDDIR"
    for _ in $(seq 50); do
        [[ -s $2 ]] && { cp "$2" "$PIDDIR/$1.pid"; return 0; }
        sleep 0.2
    done
    die "$1 wrote no pid file $2 (logs: $LOGS)"
}

stop_one() {   # stop_one NAME: stop the NAME this script started, nothing else
    local pid
    if pid=$(ours "$1"); then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do   # gone (or a zombie its parent has not reaped yet)
            kill -0 "$pid" 2>/dev/null || break
            [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]] && break
            sleep 0.2
        done
    fi
    rm -f "$PIDDIR/$1.pid"
}

stop_daemons() {   # the SLURM daemons this script started
    for d in slurmd slurmctld slurmdbd; do stop_one "$d"; done
}

refuse_foreign() {   # a daemon of these names that this script did not start: refuse
    local d pid mine
    for d in $DAEMONS; do
        mine=$(ours "$d") || mine=""
        for pid in $(pgrep -x "$d" 2>/dev/null); do
            [[ $pid == "$mine" ]] && continue
            die "a $d this script did not start is running (pid $pid): this machine has its own SLURM or database; stop it, or use that cluster instead"
        done
    done
}

if [[ ${1:-start} == stop ]]; then
    for d in $DAEMONS; do stop_one "$d"; done
    log "stopped"
    exit 0
fi
refuse_foreign
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
if ! ours munged >/dev/null; then
    rm -f /run/munge/munged.pid
    runuser -u munge -- /usr/sbin/munged
    record munged /run/munge/munged.pid
fi
wait_for 10 munged bash -c 'munge -n | unmunge'

# -- MariaDB: the accounting database of slurmdbd --------------------------------------------
chown mysql:mysql /run/mysqld
if ! ours mariadbd >/dev/null; then
    [[ -d /var/lib/mysql/mysql ]] || mariadb-install-db --user=mysql >/dev/null
    rm -f /run/mysqld/drmas-mariadbd.pid
    setsid mariadbd --user=mysql --pid-file=/run/mysqld/drmas-mariadbd.pid \
        >"$LOGS/mariadb.log" 2>&1 </dev/null &
    record mariadbd /run/mysqld/drmas-mariadbd.pid
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
rm -f /run/slurm/slurmdbd.pid /run/slurm/slurmctld.pid /run/slurm/slurmd.pid
slurmdbd
record slurmdbd /run/slurm/slurmdbd.pid
wait_for 30 slurmdbd sacctmgr -n list cluster
sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true
sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description="drmas test" Organization=drmas >/dev/null 2>&1 || true
for u in root "$USER_NAME"; do
    sacctmgr -i add user "$u" Account="$ACCOUNT" Cluster="$CLUSTER" >/dev/null 2>&1 || true
done
slurmctld
record slurmctld /run/slurm/slurmctld.pid
wait_for 30 slurmctld scontrol ping
slurmd
record slurmd /run/slurm/slurmd.pid
wait_for 30 "node $HOST" bash -c "sinfo -h -n $HOST -o %T | grep -q -E '^(idle|mixed|allocated)'"
log "up: cluster $CLUSTER, partition $PARTITION, node $HOST ($CPUS CPUs, $MEM_MB MB), account $ACCOUNT"
log "try: srun -A $ACCOUNT -p $PARTITION hostname"

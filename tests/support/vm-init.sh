#!/bin/sh
# /init of the test VM: load the NFS client modules, bring up qemu's user network, mount
# the server named on the kernel command line, run the battery, power off.
# Command line: servelab_nfsport=P servelab_mountport=P servelab_path=/export/path
# servelab_vers=3 (MOUNT + NFSv3), 4.0 (-t nfs4 -o vers=4.0) or 4 (-t nfs4, the version
# negotiated by the client: it asks 4.2, then 4.1, then 4.0).
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp /mnt
mount -t tmpfs tmp /tmp

for m in $(cat /modules.order); do
	insmod "/lib/mods/$m.ko" || echo "VMERR insmod $m failed"
done

for kv in $(cat /proc/cmdline); do
	case "$kv" in
	servelab_nfsport=*) NFSPORT=${kv#*=} ;;
	servelab_mountport=*) MOUNTPORT=${kv#*=} ;;
	servelab_path=*) EXPATH=${kv#*=} ;;
	servelab_entries=*) export DIR_ENTRIES=${kv#*=} ;;
	servelab_vers=*) VERS=${kv#*=} ;;
	servelab_script=*) SCRIPT=${kv#*=} ;;
	esac
done

# The battery's users: u1 (1000, also in group 2000), u2 (1001).
mkdir -p /etc
printf '%s\n' root:x:0:0:root:/:/bin/sh u1:x:1000:1000:u1:/tmp:/bin/sh \
	u2:x:1001:1001:u2:/tmp:/bin/sh >/etc/passwd
printf '%s\n' root:x:0: u1:x:1000: u2:x:1001: shared:x:2000:u1 >/etc/group

ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2

# A test's own script instead of the battery (tests/support/kvm.rs: Vm::run_script).
if [ -n "$SCRIPT" ]; then
	sh "/$SCRIPT.sh"
	poweroff -f
fi

# Version 4 negotiated as nfs-utils' mount.nfs does it: busybox's mount hands the
# options to the kernel as they are, and the kernel does not negotiate, so ask 4.2, then
# 4.1, then 4.0; each mount(2) fails (EPROTONOSUPPORT) when the server answers the
# minor version's first COMPOUND with NFS4ERR_MINOR_VERS_MISMATCH.
mount_nfs4() {
	for minor in 4.2 4.1 4.0; do
		OPTS="vers=$minor,tcp,port=$NFSPORT"
		if mount -t nfs4 -o "$OPTS" "10.0.2.2:$EXPATH" /mnt 2>>/tmp/mount.err; then
			return 0
		fi
	done
	return 1
}

case "${VERS:-3}" in
3) TYPE=nfs OPTS="vers=3,tcp,port=$NFSPORT,mountport=$MOUNTPORT,nolock,mountproto=tcp" ;;
*) TYPE=nfs4 OPTS="vers=$VERS,tcp,port=$NFSPORT" ;;
esac
if [ "$VERS" = 4 ]; then
	mount_nfs4
else
	mount -t $TYPE -o "$OPTS" "10.0.2.2:$EXPATH" /mnt 2>/tmp/mount.err
fi
if [ $? = 0 ]; then
	echo "VMMOUNT OK"
	# The version the client settled on, from the mount's options.
	echo "VMVERS $(awk '$2 == "/mnt" { print $4 }' /proc/mounts | tr ',' '\n' | grep '^vers=')"
	export MNT=/mnt NFSPORT MOUNTPORT EXPATH TYPE OPTS
	if mkdir -p /mnt/kb; then
		sh /battery.sh all /mnt/kb
	else
		echo "VMERR mkdir /mnt/kb failed"
	fi
	echo "VMDONE"
	umount /mnt 2>/tmp/umount.err || echo "VMERR umount failed: $(tr '\n' ' ' </tmp/umount.err)"
	if [ "$TYPE" = nfs4 ]; then
		# The original experiment's mount line (issue 26), with the port added: it must
		# mount and read back what the battery wrote.
		if mount -t nfs4 -o "nolock,vers=4.0,port=$NFSPORT" "10.0.2.2:$EXPATH" /mnt \
			2>/tmp/original.err; then
			got=$(cat /mnt/kb/create/f 2>&1)
			umount /mnt
			if [ "$got" = hello ]; then
				echo "VMORIGINAL OK"
			else
				echo "VMORIGINAL FAIL read kb/create/f: $got"
			fi
		else
			echo "VMORIGINAL FAIL $(tr '\n' ' ' </tmp/original.err)"
		fi
	fi
else
	echo "VMMOUNT FAIL $(tr '\n' ' ' </tmp/mount.err)"
fi
poweroff -f

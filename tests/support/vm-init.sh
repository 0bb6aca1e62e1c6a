#!/bin/sh
# /init of the test VM: load the NFS client modules, bring up qemu's user network, mount
# the server named on the kernel command line, run the battery, power off.
# Command line: servelab_nfsport=P servelab_mountport=P servelab_path=/export/path
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

if mount -t nfs -o "vers=3,tcp,port=$NFSPORT,mountport=$MOUNTPORT,nolock,mountproto=tcp" \
	"10.0.2.2:$EXPATH" /mnt 2>/tmp/mount.err; then
	echo "VMMOUNT OK"
	export MNT=/mnt NFSPORT MOUNTPORT EXPATH
	if mkdir -p /mnt/kb; then
		sh /battery.sh all /mnt/kb
	else
		echo "VMERR mkdir /mnt/kb failed"
	fi
	echo "VMDONE"
	umount /mnt 2>/tmp/umount.err || echo "VMERR umount failed: $(tr '\n' ' ' </tmp/umount.err)"
else
	echo "VMMOUNT FAIL $(tr '\n' ' ' </tmp/mount.err)"
fi
poweroff -f

#!/bin/sh
# Run by the test VM's /init when the kernel command line says servelab_script=exports
# (tests/exports.rs): two exports of one rustnfs exports file mounted at once — A over
# NFSv3, B over NFSv4.0 and again over NFSv4.2 (both through the pseudo-filesystem) —
# each checked for its own options (A ro, B all_squash to 1234:1234; over 4.2 a
# fallocate, which the client sends as ALLOCATE), then all read while the host reloads
# the file without C; C must then mount over neither version.
# Command line: servelab_nfsport=P servelab_a=/path servelab_b=/path servelab_c=/path
# servelab_md5a=… servelab_md5b=… (each export's data file).
# Output: "VMX <item> PASS|FAIL [detail]" lines, then "VMXDONE".
for kv in $(cat /proc/cmdline); do
	case "$kv" in
	servelab_nfsport=*) P=${kv#*=} ;;
	servelab_a=*) A=${kv#*=} ;;
	servelab_b=*) B=${kv#*=} ;;
	servelab_c=*) C=${kv#*=} ;;
	servelab_md5a=*) MD5A=${kv#*=} ;;
	servelab_md5b=*) MD5B=${kv#*=} ;;
	esac
done
say() { echo "VMX $*"; }
check() { if [ "$2" = "$3" ]; then say "$1" PASS; else say "$1" FAIL "got '$2', want '$3'"; fi; }
mkdir -p /a /b /b42 /c
# No attribute cache: the marker the host puts is seen at once.
V3="vers=3,tcp,port=$P,mountport=$P,nolock,mountproto=tcp,actimeo=0"
V4="vers=4.0,tcp,port=$P,actimeo=0"
V42="vers=4.2,tcp,port=$P,actimeo=0"
if mount -t nfs -o "$V3" "10.0.2.2:$A" /a 2>/tmp/e; then
	say mount-a-v3 PASS
else
	say mount-a-v3 FAIL "$(tr '\n' ' ' </tmp/e)"
fi
if mount -t nfs4 -o "$V4" "10.0.2.2:$B" /b 2>/tmp/e; then
	say mount-b-v4 PASS
else
	say mount-b-v4 FAIL "$(tr '\n' ' ' </tmp/e)"
fi
if mount -t nfs4 -o "$V42" "10.0.2.2:$B" /b42 2>/tmp/e; then
	say mount-b-v42 PASS
	check vers-b-v42 "$(grep ' /b42 ' /proc/mounts | grep -o 'vers=[0-9.]*')" vers=4.2
else
	say mount-b-v42 FAIL "$(tr '\n' ' ' </tmp/e)"
fi
md5() { md5sum <"$1" 2>/dev/null | cut -c1-32; }
check read-a "$(md5 /a/data)" "$MD5A"
check read-b "$(md5 /b/data)" "$MD5B"
check read-b-v42 "$(md5 /b42/data)" "$MD5B"
# NFSv4.2's ALLOCATE on B, as the anonymous owner.
fallocate -l 65536 /b42/allocated 2>/tmp/e || say allocate-b-v42 FAIL "$(tr '\n' ' ' </tmp/e)"
check allocate-b-v42 "$(stat -c %s:%u:%g /b42/allocated 2>&1)" 65536:1234:1234

# ro: a write is refused with EROFS.
if echo x 2>/tmp/e >/a/new; then
	say ro-a FAIL "a file was created"
elif grep -qi "read-only" /tmp/e; then
	say ro-a PASS
else
	say ro-a FAIL "$(tr '\n' ' ' </tmp/e)"
fi
# all_squash: root's and u1's new files belong to the anonymous 1234:1234.
echo r >/b/by-root 2>/tmp/e || say squash-by-root FAIL "$(tr '\n' ' ' </tmp/e)"
su -s /bin/sh u1 -c 'echo u >/b/by-u1' </dev/null 2>/tmp/e ||
	say squash-by-u1 FAIL "$(tr '\n' ' ' </tmp/e)"
check squash-by-root "$(stat -c %u:%g /b/by-root 2>&1)" 1234:1234
check squash-by-u1 "$(stat -c %u:%g /b/by-u1 2>&1)" 1234:1234

# Read all three (from the server: the page cache is dropped each round) while the host
# reloads: it waits for b/.reading, rewrites the exports without C, sends SIGHUP, and
# then puts a/.reloaded; 20 more rounds after that.
echo >/b/.reading
n=0 bad=0 seen=0 before=0 after=0
while [ $after -lt 20 ] && [ $n -lt 1500 ]; do
	echo 3 >/proc/sys/vm/drop_caches
	[ "$(md5 /a/data)" = "$MD5A" ] || bad=$((bad + 1))
	[ "$(md5 /b/data)" = "$MD5B" ] || bad=$((bad + 1))
	[ "$(md5 /b42/data)" = "$MD5B" ] || bad=$((bad + 1))
	n=$((n + 1))
	if [ $seen = 1 ]; then
		after=$((after + 1))
	elif [ -e /a/.reloaded ]; then
		seen=1
		before=$n
	fi
	sleep 0.1
done
if [ $seen = 1 ] && [ $bad = 0 ]; then
	say read-through-reload PASS "$before rounds before the reload was seen, $after after"
else
	say read-through-reload FAIL "rounds=$n bad=$bad reload-seen=$seen"
fi
# C is gone: neither version mounts it.
if mount -t nfs -o "$V3" "10.0.2.2:$C" /c 2>/dev/null; then
	umount /c
	say gone-c-v3 FAIL "mounted"
else
	say gone-c-v3 PASS
fi
if mount -t nfs4 -o "$V4" "10.0.2.2:$C" /c 2>/dev/null; then
	umount /c
	say gone-c-v4 FAIL "mounted"
else
	say gone-c-v4 PASS
fi
umount /a
umount /b
umount /b42
echo VMXDONE

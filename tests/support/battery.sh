# Ordinary file work with busybox tools, run inside the test VM on a kernel NFS mount.
# Usage: sh battery.sh all WORKDIR    — runs every item, one line each:
#          BATTERY <name> PASS|FAIL <detail>
#        sh battery.sh one NAME DIR   — runs one item in DIR (internal).
# Each item runs in its own fresh directory, in a child shell killed after a bound, so
# one hung or failing item cannot hide the others. The perm_* items run as root and as
# two users the VM's /init defines: u1 (1000:1000, also in group 2000) and u2
# (1001:1001); the server must decide as a local file system would. Checks that read data back first drop
# the page cache, so they see what the server stored, not what the client remembers.

ITEMS="create append touch_existing touch_date excl_create truncate truncate_huge sparse errors hardlink symlink rename_over_file rename_over_dir chmod cp_p tar unlink_open names df dotdot_root mount_paths rm_rf dir_many write_8m perm_owner perm_private perm_private_dir perm_root_dir perm_chown perm_sgid_chmod perm_suid_write perm_sticky perm_groups perm_utimes special_files fcntl_lock utime_now excl_times times_64"

# Entries in the big-directory item (overridable for local sizing runs).
DIR_ENTRIES=${DIR_ENTRIES:-2000}

fail() {
	echo "$*"
	exit 1
}

# expect WHAT GOT WANT
expect() {
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
}

fresh() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# as USER CMD: runs CMD (a shell string) as USER, with its groups, in this directory;
# stdin is /dev/null, so no tool stops to ask (rm of a write-protected file would).
as() {
	u=$1
	shift
	su -s /bin/sh "$u" -c "$*" </dev/null
}

# refused WHAT USER CMD: CMD as USER must fail.
refused() {
	what=$1
	shift
	if as "$@" 2>/dev/null; then fail "$what succeeded"; fi
}

item_create() {
	echo hello >f || fail "echo > f failed"
	mkdir sub || fail "mkdir failed"
	echo inner >sub/g || fail "create in subdir failed"
	fresh
	expect "content" "$(cat f)" hello
	expect "subdir content" "$(cat sub/g)" inner
	expect "size" "$(stat -c %s f)" 6
	echo "6 bytes, subdir ok"
}

item_append() {
	printf a >f && printf b >>f && printf c >>f || fail "append failed"
	fresh
	expect "content" "$(cat f)" abc
	expect "size" "$(stat -c %s f)" 3
	echo "abc"
}

item_touch_existing() {
	echo x >f || fail "create failed"
	touch -d "2001-01-01 00:00:00" f || fail "touch -d (setup) failed"
	touch f || fail "touch of an existing file failed"
	now=$(date +%s)
	m=$(stat -c %Y f)
	[ $((now - m)) -lt 120 ] && [ $((m - now)) -lt 120 ] || fail "mtime $m not near now $now"
	touch -c nothere || fail "touch -c of a missing name failed"
	[ ! -e nothere ] || fail "touch -c created a file"
	echo "mtime $m ~ now $now"
}

item_touch_date() {
	echo x >f || fail "create failed"
	touch -d "2001-02-03 04:05:06" f || fail "touch -d failed"
	touch -d "1999-12-31 23:59:59" new || fail "touch -d of a new file failed"
	fresh
	expect "mtime" "$(stat -c %Y f)" 981173106
	expect "mtime of new" "$(stat -c %Y new)" 946684799
	expect "content kept" "$(cat f)" x
	echo "mtime 981173106"
}

item_excl_create() {
	(
		set -C
		echo first >f
	) || fail "set -C create of a new file failed"
	if (
		set -C
		echo second >f
	) 2>/dev/null; then
		fail "set -C create over an existing file succeeded"
	fi
	fresh
	expect "content" "$(cat f)" first
	echo "O_EXCL create ok, EEXIST on existing"
}

item_truncate() {
	printf 0123456789 >f || fail "create failed"
	truncate -s 4 f || fail "truncate -s 4 failed"
	fresh
	expect "size after shrink" "$(stat -c %s f)" 4
	expect "content after shrink" "$(cat f)" 0123
	truncate -s 100000 f || fail "truncate -s 100000 failed"
	fresh
	expect "size after grow" "$(stat -c %s f)" 100000
	expect "head after grow" "$(head -c 4 f)" 0123
	expect "non-zero bytes in the grown tail" "$(tail -c +5 f | tr -d '\000' | wc -c)" 0
	truncate -s 0 f || fail "truncate -s 0 failed"
	expect "size after truncate to 0" "$(stat -c %s f)" 0
	echo "4 → 100000 → 0"
}

item_truncate_huge() {
	printf abc >f || fail "create failed"
	# 2^63-1: beyond any file system; must be a clean refusal, not an I/O error.
	if msg=$(truncate -s 9223372036854775807 f 2>&1); then
		fail "truncate to 2^63-1 succeeded"
	fi
	case "$msg" in
	*"I/O error"* | *"Input/output"*) fail "truncate to 2^63-1: $msg" ;;
	esac
	expect "size after refused truncate" "$(stat -c %s f)" 3
	echo "refused: ${msg##*: }"
}

item_sparse() {
	printf x | dd of=f bs=1 seek=1048576 conv=notrunc 2>/dev/null || fail "dd seek failed"
	fresh
	expect "size" "$(stat -c %s f)" 1048577
	expect "hole is zeros" "$(head -c 1048576 f | tr -d '\000' | wc -c)" 0
	expect "last byte" "$(tail -c 1 f)" x
	echo "1 MiB hole + 1 byte"
}

item_errors() {
	mkdir d && echo x >d/x && echo y >f || fail "setup failed"
	# Each refusal must carry the right error, as busybox prints it (strerror).
	m=$(mkdir d 2>&1) && fail "mkdir of an existing name succeeded"
	case "$m" in *"File exists"*) ;; *) fail "mkdir existing: $m" ;; esac
	m=$(rmdir d 2>&1) && fail "rmdir of a non-empty directory succeeded"
	case "$m" in *"not empty"* | *"File exists"*) ;; *) fail "rmdir non-empty: $m" ;; esac
	m=$(cat nothere 2>&1) && fail "cat of a missing name succeeded"
	case "$m" in *"No such file"*) ;; *) fail "cat missing: $m" ;; esac
	m=$(ln f d/x 2>&1) && fail "ln onto an existing name succeeded"
	case "$m" in *"File exists"*) ;; *) fail "ln existing: $m" ;; esac
	m=$(ln d dlink 2>&1) && fail "hard link to a directory succeeded"
	m=$(rm d 2>&1) && fail "rm of a directory succeeded"
	m=$(cd f 2>&1) && fail "cd into a file succeeded"
	[ -d d ] && [ "$(cat d/x)" = x ] && [ "$(cat f)" = y ] || fail "a refused call changed something"
	echo "EEXIST, ENOTEMPTY, ENOENT, EPERM, ENOTDIR as expected"
}

item_hardlink() {
	echo data >f || fail "create failed"
	ln f g || fail "ln failed"
	fresh
	expect "link count" "$(stat -c %h f)" 2
	expect "same inode" "$(stat -c %i g)" "$(stat -c %i f)"
	expect "content via link" "$(cat g)" data
	rm f || fail "rm of the first name failed"
	expect "link count after rm" "$(stat -c %h g)" 1
	echo "nlink 2, same inode"
}

item_symlink() {
	echo target-data >t || fail "create failed"
	ln -s t l || fail "ln -s failed"
	ln -s "no/such/place" dangling || fail "ln -s (dangling) failed"
	expect "readlink" "$(readlink l)" t
	expect "readlink dangling" "$(readlink dangling)" "no/such/place"
	expect "read through link" "$(cat l)" target-data
	[ -L l ] || fail "not a symlink"
	echo "readlink ok"
}

item_rename_over_file() {
	echo A >a && echo B >b || fail "create failed"
	mv a b || fail "mv a b failed"
	[ ! -e a ] || fail "a still exists"
	fresh
	expect "content" "$(cat b)" A
	expect "entries" "$(ls | wc -l)" 1
	echo "replaced"
}

item_rename_over_dir() {
	mkdir d1 d2 || fail "mkdir failed"
	echo x >d1/x || fail "create failed"
	mv -T d1 d2 || fail "rename over an empty directory failed"
	[ ! -e d1 ] || fail "d1 still exists"
	expect "moved content" "$(cat d2/x)" x
	mkdir d3 d4 && echo y >d4/y || fail "setup failed"
	if mv -T d3 d4 2>/dev/null; then fail "rename over a non-empty directory succeeded"; fi
	[ -d d3 ] && [ -e d4/y ] || fail "failed rename changed something"
	echo "over empty ok, non-empty refused"
}

item_chmod() {
	echo x >f || fail "create failed"
	chmod 640 f || fail "chmod 640 failed"
	expect "mode" "$(stat -c %a f)" 640
	chmod 755 f || fail "chmod 755 failed"
	mkdir d && chmod 700 d || fail "chmod of a directory failed"
	fresh
	expect "mode" "$(stat -c %a f)" 755
	expect "dir mode" "$(stat -c %a d)" 700
	echo "640 → 755"
}

item_cp_p() {
	echo payload >src || fail "create failed"
	chmod 604 src || fail "chmod failed"
	touch -d "2003-04-05 06:07:08" src || fail "touch -d failed"
	cp -p src dst || fail "cp -p failed"
	fresh
	expect "mtime" "$(stat -c %Y dst)" "$(stat -c %Y src)"
	expect "mode" "$(stat -c %a dst)" 604
	expect "content" "$(cat dst)" payload
	echo "mtime $(stat -c %Y dst) mode 604"
}

item_tar() {
	mkdir -p src/sub || fail "mkdir failed"
	echo one >src/a && echo two >src/sub/b && ln -s a src/l || fail "setup failed"
	touch -d "2002-03-04 05:06:07" src/a src/sub/b || fail "touch -d failed"
	touch -d "2002-01-01 00:00:00" src/sub || fail "touch -d (dir) failed"
	tar cf t.tar src || fail "tar c failed"
	mkdir out && tar xf t.tar -C out || fail "tar x failed"
	fresh
	for p in a sub/b; do
		cmp "src/$p" "out/src/$p" || fail "$p differs"
		expect "mtime of $p" "$(stat -c %Y "out/src/$p")" "$(stat -c %Y "src/$p")"
	done
	# (Directory mtimes are not compared: busybox tar sets them before it extracts the
	# directory's entries, which then update them.)
	expect "symlink" "$(readlink out/src/l)" a
	tar xf t.tar -C out || fail "tar x over existing files failed"
	echo "mtimes kept"
}

item_unlink_open() {
	echo still-here >f || fail "create failed"
	exec 3<f
	rm f || fail "rm failed"
	[ ! -e f ] || fail "f still visible"
	got=$(cat <&3)
	exec 3<&-
	expect "read after unlink" "$got" still-here
	n=0
	while [ "$(ls -A | wc -l)" != 0 ] && [ $n -lt 20 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	expect "entries after close" "$(ls -A | wc -l)" 0
	echo "read ok, silly-rename cleaned"
}

item_names() {
	long=$(head -c 255 /dev/zero | tr '\000' n)
	echo L >"$long" || fail "255-byte name: create failed"
	expect "255-byte name content" "$(cat "$long")" L
	if (echo X >"${long}x") 2>/dev/null; then fail "256-byte name accepted"; fi
	echo S >"a b  c " || fail "spaced name: create failed"
	expect "spaced name" "$(cat "a b  c ")" S
	u="héllo wörld 日本語.txt"
	echo U >"$u" || fail "UTF-8 name: create failed"
	expect "UTF-8 name" "$(cat "$u")" U
	# READDIR must give the names back byte for byte (busybox ls would print '?' for
	# non-ASCII bytes, so compare what the shell's glob reads).
	seen=0
	for e in *; do
		case "$e" in
		"$u" | "$long" | "a b  c ") seen=$((seen + 1)) ;;
		*) fail "unexpected entry '$e'" ;;
		esac
	done
	expect "names listed" "$seen" 3
	expect "entries" "$(ls -A | wc -l)" 3
	echo "255, spaces, UTF-8 ok"
}

item_df() {
	# -P: one line per file system even when the source name is long.
	line=$(df -P -k "$MNT" | tail -1) || fail "df failed"
	size=$(echo "$line" | awk '{print $(NF-4)}')
	avail=$(echo "$line" | awk '{print $(NF-2)}')
	[ "$size" -gt 0 ] || fail "size $size"
	[ "$avail" -gt 0 ] || fail "avail $avail"
	blocks=$(stat -f -c %b "$MNT") || fail "statfs failed"
	[ "$blocks" -gt 0 ] || fail "statfs blocks $blocks"
	echo "size ${size}k avail ${avail}k"
}

item_dotdot_root() {
	expect "cd MNT/.." "$(cd "$MNT/.." && pwd)" /
	[ -e "$MNT/../init" ] || fail "MNT/.. is not the VM's root"
	expect "inode of MNT/kb/.." "$(stat -c %i "$MNT/kb/..")" "$(stat -c %i "$MNT")"
	expect "inode of MNT/./kb/../." "$(stat -c %i "$MNT/./kb/../.")" "$(stat -c %i "$MNT")"
	echo "root stays root"
}

item_mount_paths() {
	# MOUNT of a path that is a symlink must be refused (NOTDIR), and MOUNT of the
	# export's parent must not hand out anything above the export.
	base=${EXPATH%/}
	ln -s . lnk || fail "ln -s failed"
	mkdir -p /mnt2
	opts="vers=3,tcp,port=$NFSPORT,mountport=$MOUNTPORT,nolock,mountproto=tcp"
	if mount -t nfs -o "$opts" "10.0.2.2:$base/kb/mount_paths/lnk" /mnt2 2>/dev/null; then
		umount /mnt2
		fail "MOUNT of a symlink succeeded"
	fi
	if mount -t nfs -o "$opts" "10.0.2.2:$base/.." /mnt2 2>/dev/null; then
		above=$(ls -A /mnt2 | tr '\n' ' ')
		umount /mnt2
		[ "$above" = "kb " ] || fail "MOUNT of the export's parent shows: $above"
		echo "symlink refused, parent = export root"
	else
		echo "symlink refused, parent refused"
	fi
}

item_rm_rf() {
	mkdir -p tree/a/b/c tree/d || fail "mkdir failed"
	for d in tree tree/a tree/a/b tree/a/b/c tree/d; do
		for i in 1 2 3 4 5; do echo "$i" >"$d/f$i" || fail "create failed"; done
		ln -s f1 "$d/l" || fail "ln -s failed"
	done
	rm -rf tree || fail "rm -rf failed"
	[ ! -e tree ] || fail "tree still exists"
	expect "entries" "$(ls -A | wc -l)" 0
	echo "30 files, 5 links, 5 dirs removed"
}

item_dir_many() {
	i=0
	while [ $i -lt "$DIR_ENTRIES" ]; do
		: >"e$i" || fail "create e$i failed"
		i=$((i + 1))
	done
	fresh
	expect "ls count" "$(ls | wc -l)" "$DIR_ENTRIES"
	expect "ls -l count" "$(ls -l | grep -c '^-')" "$DIR_ENTRIES"
	[ -e "e$((DIR_ENTRIES - 1))" ] || fail "last entry missing"
	echo "$DIR_ENTRIES entries"
}

item_write_8m() {
	dd if=/dev/urandom of=/tmp/big bs=1M count=8 2>/dev/null || fail "dd (local) failed"
	want=$(md5sum </tmp/big | cut -d' ' -f1)
	cp /tmp/big big || fail "cp to NFS failed"
	rm /tmp/big
	fresh
	got=$(md5sum <big | cut -d' ' -f1)
	expect "md5 read back" "$got" "$want"
	expect "size" "$(stat -c %s big)" 8388608
	# The host compares this md5 with the file that landed on the export.
	echo "md5=$want"
}

item_perm_owner() {
	chmod 777 . || fail "chmod 777 . failed"
	as u1 'mkdir d && echo x >f && mkfifo p && ln -s f s' || fail "create as u1 failed"
	for n in d f p s; do
		expect "owner of $n" "$(stat -c %u:%g "$n")" 1000:1000
	done
	echo "u1 creates dir, file, fifo, symlink as 1000:1000"
}

item_perm_private() {
	chmod 777 . || fail "chmod 777 . failed"
	as u1 'umask 077; echo secret >f' || fail "u1 create failed"
	expect "mode" "$(stat -c %a f)" 600
	expect "owner reads its 0600 file" "$(as u1 'cat f')" secret
	refused "u2 reading u1's 0600 file" u2 'cat f'
	as u1 'chmod 0 f && chmod 600 f' || fail "the owner could not chmod its 0000 file"
	echo "owner reads, other refused"
}

item_perm_private_dir() {
	chmod 777 . || fail "chmod 777 . failed"
	as u1 'mkdir p && chmod 700 p && echo secret >p/f && chmod 644 p/f' || fail "u1 setup failed"
	expect "mode" "$(stat -c %a p)" 700
	expect "owner lists its 0700 directory" "$(as u1 'ls p')" f
	expect "owner reads in it" "$(as u1 'cat p/f')" secret
	fresh
	for cmd in 'ls p' 'cat p/f'; do
		if out=$(as u2 "$cmd" 2>&1); then fail "u2 '$cmd' in u1's 0700 directory succeeded: $out"; fi
		case "$out" in
		*"ermission denied"*) ;;
		*) fail "u2 '$cmd' in u1's 0700 directory: not EACCES: $out" ;;
		esac
	done
	echo "owner lists and reads, u2's ls and cat get EACCES"
}

item_perm_root_dir() {
	echo r >rootfile && mkdir rd && echo r >rd/rf || fail "setup failed"
	refused "u1 removing root's file from a root 0755 directory" u1 'rm -f rd/rf'
	refused "u1 creating in a root 0755 directory" u1 'echo x >rd/new'
	refused "u1 renaming in a root 0755 directory" u1 'mv rd/rf rd/rg'
	refused "u1 chmod 777 of root's directory" u1 'chmod 777 rd'
	refused "u1 chmod 4755 of root's file" u1 'chmod 4755 rootfile'
	refused "u1 appending to root's 0644 file" u1 'echo x >>rootfile'
	refused "u1 truncating root's 0644 file (O_TRUNC)" u1 ': >rootfile'
	refused "u1 setting times of root's file" u1 'touch -d "2001-01-01 00:00:00" rootfile'
	fresh
	[ -e rd/rf ] && [ ! -e rd/new ] && [ ! -e rd/rg ] || fail "a refused call changed the directory"
	expect "dir mode" "$(stat -c %a rd)" 755
	expect "file mode" "$(stat -c %a rootfile)" 644
	expect "content" "$(cat rootfile)" r
	echo "rm, create, mv, chmod, append, O_TRUNC, utimes all refused"
}

item_perm_chown() {
	chmod 777 . || fail "chmod 777 . failed"
	as u1 'echo x >f' || fail "u1 create failed"
	refused "u1 giving its file to root" u1 'chown 0 f'
	as u1 'chgrp 2000 f' || fail "u1 chgrp to its own group 2000 failed"
	expect "group" "$(stat -c %g f)" 2000
	refused "u1 chgrp to a group it is not in" u1 'chgrp 0 f'
	refused "u2 chmod of u1's file" u2 'chmod 777 f'
	refused "u2 chown of u1's file" u2 'chown 1001 f'
	chown 1001:1001 f || fail "root chown failed"
	expect "owner after root's chown" "$(stat -c %u:%g f)" 1001:1001
	echo "chown/chgrp by the rules"
}

item_perm_sgid_chmod() {
	chmod 777 . || fail "chmod 777 . failed"
	as u1 'echo x >f' || fail "u1 create failed"
	chgrp 0 f || fail "root chgrp failed"
	as u1 'chmod 2755 f' || fail "u1 chmod of its own file failed"
	fresh
	expect "mode (SGID cleared: u1 is not in group 0)" "$(stat -c %a f)" 755
	as u1 'chgrp 2000 f && chmod 2755 f' || fail "u1 chgrp + chmod failed"
	fresh
	expect "mode (SGID kept: u1 is in group 2000)" "$(stat -c %a f)" 2755
	echo "SGID cleared outside the group, kept inside"
}

item_perm_suid_write() {
	chmod 777 . || fail "chmod 777 . failed"
	as u1 'echo x >f && chmod 4777 f' || fail "u1 setup failed"
	expect "mode" "$(stat -c %a f)" 4777
	as u2 'echo y >>f' || fail "u2 could not append to a 4777 file"
	fresh
	expect "mode after another user's write" "$(stat -c %a f)" 777
	expect "content" "$(tr '\n' , <f)" "x,y,"
	echo "SUID cleared by a write from a non-owner"
}

item_perm_sticky() {
	mkdir t && chmod 1777 t || fail "setup failed"
	as u1 'echo x >t/f' || fail "u1 create failed"
	refused "u2 removing u1's file in a sticky directory" u2 'rm -f t/f'
	refused "u2 renaming u1's file in a sticky directory" u2 'mv t/f t/g'
	[ -e t/f ] || fail "u1's file is gone"
	as u1 'rm t/f' || fail "u1 could not remove its own file"
	echo "sticky directory rules"
}

item_perm_groups() {
	mkdir g && chgrp 2000 g && chmod 770 g || fail "setup failed"
	as u1 'echo x >g/f' || fail "u1 (in group 2000) could not create in a 0770 group dir"
	expect "owner" "$(stat -c %u:%g g/f)" 1000:1000
	refused "u2 (not in group 2000) creating in it" u2 'echo x >g/h'
	chmod 2770 g || fail "chmod 2770 failed"
	as u1 'mkdir g/sub && echo y >g/y' || fail "u1 create in the SGID dir failed"
	expect "group of a file in an SGID dir" "$(stat -c %g g/y)" 2000
	expect "group of a dir in an SGID dir" "$(stat -c %g g/sub)" 2000
	case "$(stat -c %a g/sub)" in 2*) ;; *) fail "new dir in an SGID dir lost SGID: $(stat -c %a g/sub)" ;; esac
	echo "supplementary groups and SGID directories"
}

item_perm_utimes() {
	chmod 777 . || fail "chmod 777 . failed"
	as u1 'echo x >f && chmod 666 f' || fail "u1 setup failed"
	as u2 'touch f' || fail "u2 touch (now) of a 0666 file failed"
	refused "u2 setting explicit times on u1's file" u2 'touch -d "2001-01-01 00:00:00" f'
	as u1 'touch -d "2001-01-01 00:00:00" f' || fail "the owner could not set times"
	fresh
	expect "mtime" "$(stat -c %Y f)" 978307200
	echo "now by a writer, explicit times by the owner only"
}

# near WHAT GOT WANT: GOT within two minutes of WANT (seconds).
near() {
	[ $(($2 - $3)) -lt 120 ] && [ $(($3 - $2)) -lt 120 ] || fail "$1: $2 not near $3"
}

# utimensat with UTIME_NOW for both times (what `touch` of an existing file sends), and
# for one time with the other omitted.
item_utime_now() {
	echo x >f || fail "create failed"
	old=978307200
	utimes f $old $old || fail "utimes (setup) failed"
	utimes f now now || fail "utimensat(UTIME_NOW, UTIME_NOW) failed"
	now=$(date +%s)
	fresh
	near "atime after UTIME_NOW" "$(stat -c %X f)" "$now"
	near "mtime after UTIME_NOW" "$(stat -c %Y f)" "$now"
	utimes f $old $old && utimes f omit now || fail "utimensat(UTIME_OMIT, UTIME_NOW) failed"
	fresh
	expect "atime after UTIME_OMIT" "$(stat -c %X f)" $old
	near "mtime after UTIME_NOW" "$(stat -c %Y f)" "$now"
	utimes f $old $old && utimes f now omit || fail "utimensat(UTIME_NOW, UTIME_OMIT) failed"
	fresh
	near "atime after UTIME_NOW" "$(stat -c %X f)" "$now"
	expect "mtime after UTIME_OMIT" "$(stat -c %Y f)" $old
	echo "now/now, omit/now, now/omit"
}

# An O_EXCL create: NFSv3 and v4 keep the create's verifier in the new file's times
# until the client sets them, which it does when the server says so.
item_excl_times() {
	(
		set -C
		echo x >f
	) || fail "set -C create failed"
	now=$(date +%s)
	fresh
	near "atime after an O_EXCL create" "$(stat -c %X f)" "$now"
	near "mtime after an O_EXCL create" "$(stat -c %Y f)" "$now"
	echo "times near now"
}

# Times past 2038 and 2106: NFSv3 carries 32 unsigned bits of seconds, NFSv4 64 signed.
item_times_64() {
	echo x >f || fail "create failed"
	list="2147483647 2147483648 4294967295"
	[ "$TYPE" = nfs4 ] && list="$list 4294967296 8589934592"
	for t in $list; do
		m=$(utimes f $t $t 2>&1) || fail "utimes $t: $m"
		fresh
		expect "atime:mtime set to $t" "$(stat -c %X:%Y f)" "$t:$t"
	done
	echo "$list"
}

item_special_files() {
	mkfifo p || fail "mkfifo failed"
	m=$(chmod 600 p 2>&1) || fail "chmod of a fifo: $m"
	m=$(chown 1000:1000 p 2>&1) || fail "chown of a fifo: $m"
	m=$(touch -d "2001-02-03 04:05:06" p 2>&1) || fail "touch -d of a fifo: $m"
	fresh
	expect "fifo mode:owner:mtime" "$(stat -c %a:%u:%g:%Y p)" 600:1000:1000:981173106
	# A device node: made, or refused with EPERM, never "Unknown error 524" (NOTSUPP).
	if m=$(mknod n c 1 3 2>&1); then
		rm n
		dev="device made"
	else
		case "$m" in *"not permitted"*) dev="device refused (EPERM)" ;; *) fail "mknod c 1 3: $m" ;; esac
	fi
	echo "fifo chmod/chown/touch; $dev"
}

item_fcntl_lock() {
	# Two processes, one fcntl write lock on the whole file: while the first holds it, a
	# try fails and a waiter blocks until it is released. Over NFSv4 the other process
	# uses a second mount (nosharecache: its own inodes), so the client cannot settle
	# the conflict locally and the server must (LOCK denied, the waiter polling); over
	# v3 with nolock the client keeps locks to itself, so both use the one mount.
	echo x >f || fail "create failed"
	other=f
	if [ "$TYPE" = nfs4 ]; then
		mkdir -p /mnt3
		mount -t nfs4 -o "$OPTS,nosharecache" "10.0.2.2:$EXPATH" /mnt3 ||
			fail "second mount failed"
		other=/mnt3/kb/fcntl_lock/f
		[ -e "$other" ] || { umount /mnt3; fail "f not seen through the second mount"; }
	fi
	lockhold f 5 >held.out 2>&1 &
	holder=$!
	n=0
	until grep -q locked held.out; do
		[ $n -lt 200 ] || fail "the first lock was not taken: $(cat held.out)"
		sleep 0.1
		n=$((n + 1))
	done
	lockhold -n "$other"
	rc=$?
	start=$(date +%s)
	lockhold "$other" 0 >waiter.out 2>&1
	wrc=$?
	waited=$(($(date +%s) - start))
	wait $holder
	hrc=$?
	lockhold -n "$other"
	frc=$?
	[ "$other" = f ] || umount /mnt3
	[ $rc = 1 ] || fail "a try while the lock is held: rc $rc, want 1 (held)"
	[ $wrc = 0 ] || fail "the waiting lock failed: $(cat waiter.out)"
	[ $hrc = 0 ] || fail "the holder failed: $(cat held.out)"
	[ $waited -ge 2 ] || fail "the waiter did not wait for the holder (${waited}s)"
	[ $frc = 0 ] || fail "the lock was not free after both released it"
	echo "held lock refused to a try, waiter blocked ${waited}s, free after"
}

if [ "$1" = one ]; then
	cd "$3" || exit 2
	"item_$2"
	exit $?
fi

if [ "$1" = all ]; then
	W=$2
	for name in $ITEMS; do
		start=$(date +%s)
		# busybox timeout leaves a watcher process behind for up to a second; it runs
		# in / so that it never holds the mount busy.
		if mkdir -p "$W/$name"; then
			timeout -s KILL 90 sh "$0" one "$name" "$W/$name" >/tmp/item.out 2>&1
			rc=$?
		else
			echo "cannot make work directory $W/$name" >/tmp/item.out
			rc=2
		fi
		secs=$(($(date +%s) - start))
		detail="$(tr '\n' ' ' </tmp/item.out | cut -c1-300) (${secs}s)"
		if [ $rc = 0 ]; then
			echo "BATTERY $name PASS $detail"
		else
			echo "BATTERY $name FAIL rc=$rc $detail"
		fi
	done
fi

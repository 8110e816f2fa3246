// Package blocktree is the checksum of a disk image as a list of block
// hashes: a SHA-256 per 1 MiB block (the leaves) and one SHA-256 over them
// (the root). A step that changes a few blocks of an image (the
// conversion) re-hashes only those blocks and gets the new root without
// reading the rest of the image again; two trees name the first block in
// which their images differ.
//
// # The definition
//
// The tree of an image's first size bytes (size is the disk's capacity,
// not the size of the file or device that holds it):
//
//   - BlockSize is 1 MiB (1048576 bytes). Block i is the bytes
//     [i*BlockSize, min((i+1)*BlockSize, size)): every block is whole but
//     the last, which may be shorter. There are ceil(size/BlockSize)
//     blocks; a size of 0 has none.
//   - Leaf i is the SHA-256 of block i.
//   - The root is the SHA-256 of the concatenation, over all leaves in
//     order, of each leaf's lowercase hex followed by "\n". The root of a
//     size of 0 is the SHA-256 of the empty string.
//
// Scheme ("sha256-tree-1MiB") names the definition wherever a root is
// given as a checksum.
//
// So coreutils recompute a root without this package, for a file of
// exactly size bytes:
//
//	split -b 1048576 --filter='sha256sum | cut -c1-64' disk.img | sha256sum
//
// and for a device, or a file larger than the disk:
//
//	head -c SIZE /dev/xyz | split -b 1048576 --filter='sha256sum | cut -c1-64' | sha256sum
//
// (TestCoreutilsPipelines runs both against Root).
//
// # Why 1 MiB
//
// A conversion's writes (virt-v2v: an initramfs, configuration files, a
// few hundred MiB scattered over the disk) touch few 1 MiB blocks, so
// re-hashing them reads little more than what was written. A TiB has
// 1,048,576 leaves, 32 MiB of tree: small enough for a file beside the
// image, and to hold in memory where a command must. 1 MiB divides the
// transfer's piece grid (a piece is half a chunk: 4 MiB by default), and
// SHA-256 over 1 MiB per call amortises the per-call and per-goroutine
// costs of hashing blocks in parallel.
//
// # The tree file
//
// A tree is kept in a file beside its image (disk.img.tree): one text line
//
//	vmm-block-tree v1 block=1048576 size=<bytes> root=<64 lowercase hex>\n
//
// followed by the raw 32-byte leaves, in order, and nothing else.
// ReadTree and Reader refuse anything else: another header, a leaf count
// that is not the size's, bytes past the leaves, or leaves whose root is
// not the header's. Their memory grows with the bytes actually read,
// never with a count taken from the header.
//
// # Computing a tree
//
// Compute (and Walk, which hands out the leaves in order instead of
// keeping them) hashes the blocks of an io.ReaderAt on GOMAXPROCS
// goroutines. A reader that says where its data is (DataMapper: a sparse
// file, through SEEK_DATA and SEEK_HOLE, in package transfer) has the
// blocks that lie wholly in its holes given ZeroLeaf without being read;
// a block read as all zeros is not hashed either. Builder takes an
// image's bytes in order (the transfer's in-order hasher), with a state
// that can be saved and resumed. Tree.Update re-hashes the blocks that
// overlap given byte ranges, such as those ParseQemuImgMap reads from
// `qemu-img map --output=json` of the overlay a conversion wrote.
//
// The package does no I/O of its own beyond the io interfaces it is given.
package blocktree

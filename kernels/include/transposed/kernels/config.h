// TransposeConfig: the printable policy that selects one member of the CUDA transpose family.
//
// A configuration names an algorithm and its compile-time parameters (tile shape, threads per
// block, global access width, shared-memory padding or swizzle). The family is a fixed list of
// configurations instantiated for each element size (kernels/policy.h); this header is pure host
// C++ and compiles without CUDA, so the tuner, the daemon and the client can enumerate, name and
// check configurations anywhere. The family itself is one constexpr table of policies
// (kernels/policy.h). Launching lives in launch.h.
//
// Algorithms:
//   naive   one element per thread, coalesced reads, strided writes (reference point).
//   tile    a TILE_ROWS x TILE_COLS tile staged through shared memory by 32 * block_rows threads
//           that walk the tile (several elements per thread). vec_bytes == 0: element-size global
//           accesses (the textbook kernels); vec_bytes in {4, 8, 16}: every global load and store
//           is vec_bytes wide, 1- and 2-byte elements are gathered as 32-bit words from shared
//           memory and transposed in registers (byte_perm). realign == 1 (vec_bytes 16 only):
//           rows need no alignment; each tile row is read as the aligned 16-byte windows around
//           it and each output row segment written as aligned 16-byte windows (element pieces
//           at its two ends), the bytes realigned in registers with warp shuffles and funnel
//           shifts, so odd row lengths (e.g. 4097x3001) still get 16-byte global accesses.
//           Shared-memory bank conflicts are
//           avoided either with `pad` elements per tile row or with an XOR swizzle of the
//           shared-memory row's units (swizzle == 1). Edge tiles use a predicated element path.
//   skinny  for problems with one side of 1..256 elements: a tile of tile_rows elements along the
//           long side (tall: x 2 for a short side of 5..8, x 4 for 1..4; both directions:
//           / 2 for 17..32, / 4 for 33..64 ... / 16 for 129..256) times the short side,
//           staged through shared memory with 16-byte global accesses (the contiguous side as
//           raw bytes; the strided side of a tall problem as aligned windows around output rows
//           of any alignment, of a wide one as vectors where its input rows are aligned).
//   copy    a device-to-device copy (cudaMemcpyAsync), for the problems whose input and output
//           have the same layout: one row or one column, both sides dense (1 x N -> N x 1, any
//           batch). The transpose of such a problem moves no element, and the kernels stayed well
//           below the copy there (docs/design/kernel-family.md).
//   cublas.geam  cuBLAS geam with op(A) = A^T, alpha 1, beta 0 (cublasSgeam for f32,
//           cublasDgeam for f64; one matrix, dimensions and leading dimensions below 2^31), loaded
//           at run time with dlopen: a candidate where the library is present. geam computes
//           1.0 * a, which is the identity on every value except NaN: f32 NaNs come out as the
//           canonical NaN and f64 signaling NaNs come out quieted (cuBLAS 13.1; the measurement:
//           docs/design/kernel-family.md). So it is offered only for the floating dtypes f32 and f64 (never for integer
//           or complex data: an i32 whose bits look like a NaN would change, and the complex
//           geam's 1 * re - 0 * im turns an infinite imaginary part into a NaN real part), and its
//           check is value-exact (canonicalizes_nan(): every non-NaN element bit-identical, NaNs
//           stay NaNs). Launch runs it for any f32/f64 problem; the tuner offers it only for
//           problems that ask for value-exact answers (CandidateConfigs, Problem::exactness).
//   cutensor.permute  cuTENSOR's permutation B = 1 * A (cutensorPermute, 2.x API), loaded at run
//           time with dlopen where libcutensor.so.2 is present; f32 and f64, any batch and leading
//           dimensions (modes and strides: kernels/vendor_layout.h). It computes alpha * a in
//           floating point like geam (it has no integer types), so it is value-exact only
//           (canonicalizes_nan()) and offered only for value-exact problems; f16/bf16, complex and
//           integer dtypes are refused with the reason (vendor_layout.h). Implemented from the
//           published API; not yet run on a GPU with the library present (none of ours has it).
//
// All types here are plain values; all functions are thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/problem.h"
#include "core/status.h"

namespace transposed::kernels {

enum class Algorithm : int {
  kNaive = 0,
  kTile = 1,
  kSkinny = 2,
  kCublasGeam = 3,
  kCutensorPermute = 4,
  kCopy = 5
};

// "naive", "tile", "skinny", "cublas.geam", "cutensor.permute", "copy".
std::string_view AlgorithmName(Algorithm a);

struct TransposeConfig {
  Algorithm algorithm = Algorithm::kTile;
  // Tile shape in elements (input rows x input columns). Skinny: tile_rows is the tile length
  // along the long side and tile_cols is 0. Naive: both 0.
  int tile_rows = 32;
  int tile_cols = 32;
  // Threads per block are 32 * block_rows (block_rows warps; for a 32-wide tile this is exactly
  // the textbook TILE_DIM x BLOCK_ROWS block).
  int block_rows = 8;
  // Width of every global load and store in bytes; 0 means element-size accesses.
  int vec_bytes = 0;
  // Shared-memory padding in elements per tile row (tile only; 0 when swizzled).
  int pad = 0;
  // 1: XOR-swizzled shared-memory layout instead of padding (tile only).
  int swizzle = 0;
  // 1: vector accesses on rows of any alignment (tile with vec_bytes 16 only; see above).
  // 2 (".realign2", 1- and 2-byte elements, tile rows of 128 or 256 bytes, swizzled): the same
  // with the windows realigned in registers and the columns whose output rows share a misalignment
  // packed into shared words, so the gather reads 4-byte words and transposes them in registers.
  int realign = 0;
  // 2 or 3: persistent tile with that many shared buffers (tile with vec_bytes 16 and swizzle
  // only; the family has async 2): a grid of as many blocks as fit on the device walks the tiles,
  // and the loads of a block's next tiles are issued asynchronously (cp.async, 16 bytes,
  // global -> shared) before it stores the current one. 0: one tile at a time with
  // register-staged loads.
  int async = 0;
  // K > 0 (".walk<K>", packed realigning tiles only): a block walks K tiles down one tile column
  // instead of one tile, carrying the packed rows at the bottom of each tile into the next as its
  // rows above (read once instead of re-staged by every tile) and staging the next tile while it
  // writes the current one. 0: one tile per block step.
  int walk = 0;

  int threads() const { return 32 * block_rows; }
  // True for members that run a vendor library (cuBLAS) rather than our kernels.
  bool vendor() const {
    return algorithm == Algorithm::kCublasGeam || algorithm == Algorithm::kCutensorPermute;
  }
  // True when the member may replace a NaN's payload (by another NaN) but is otherwise
  // bit-exact; checks then compare values (see cublas.geam above). False for all our kernels.
  bool canonicalizes_nan() const { return vendor(); }
  // Whether the member's output meets a problem's exactness (core/problem.h): every member
  // meets value-exact; bit-exact is met by every member that does not canonicalize NaNs.
  bool meets(Exactness e) const { return e == Exactness::kValue || !canonicalizes_nan(); }

  // Stable name from the parameters: "naive", "tile32x32.rows8.pad1",
  // "tile64x64.rows8.vec16.swz", "tile64x64.rows8.vec16.realign.swz",
  // "tile64x64.rows4.vec16.swz.async2", "tile128x128.rows4.vec16.realign2.swz.walk4",
  // "skinny.l512.rows8", "cublas.geam", "cutensor.permute".
  std::string Name() const;
  // Every field: algorithm (0 naive, 1 tile, 2 skinny, 3 cublas.geam,
  // 4 cutensor.permute), tile_rows, tile_cols, block_rows,
  // vec_bytes, pad, swizzle, realign, async, walk.
  std::map<std::string, int64_t> Params() const;
  // The member (of the family table, or a retired row) whose Name() is `name`: a lookup, not a
  // parser (transposed/kernels/family.h). INVALID_ARGUMENT naming the name when no row prints it.
  static StatusOr<TransposeConfig> FromName(std::string_view name);
  // The member whose Params() agree with `params` ("algorithm" required); a map without keys
  // added later (realign, async, walk) names the member whose left-out keys are 0. Unknown keys, or
  // values no member has, or several members, are INVALID_ARGUMENT.
  static StatusOr<TransposeConfig> FromParams(const std::map<std::string, int64_t>& params);

  bool operator==(const TransposeConfig& o) const;
  bool operator!=(const TransposeConfig& o) const { return !(*this == o); }
};

// The whole family instantiated for an element size (1, 2, 4, 8, 16), in a deterministic order;
// empty for other sizes.
const std::vector<TransposeConfig>& FamilyConfigs(int elem_size);

// The configurations valid for this problem (element size, shape, strides), deterministic order,
// never empty for a valid problem. Pure host code. Empty for an invalid problem.
std::vector<TransposeConfig> EnumerateConfigs(const Problem& p);

// The configurations a tuner may offer for this problem: EnumerateConfigs(p) less the members
// whose output does not meet the problem's (normalized) exactness, so cublas.geam only for a
// value-exact f32/f64 problem. Same order. A member's check must then compare values where it
// canonicalizes NaNs (harness.h RotatingBuffers::CompareCheck nan_equal).
std::vector<TransposeConfig> CandidateConfigs(const Problem& p);

// Whether a config can run this problem (INVALID_ARGUMENT naming why not). Pointer alignment is
// checked by Launch (vector configs need in/out aligned to vec_bytes).
Status CheckConfig(const TransposeConfig& c, const Problem& p);

// Whether the problem's output has its input's layout (one row or one column, both sides dense:
// element i of the input is element i of the output, batch entries alike): the copy member.
bool SameLayoutTransposed(const Problem& p);

// Which side a skinny config treats as narrow: true ("tall") when the input rows are dense and
// cols <= 16, or cols <= 256 and the rows are not a narrower side of dense output rows, so the
// tile is read as raw bytes; otherwise rows <= 256 with dense output rows.
bool SkinnyIsTall(const Problem& p);
// Dynamic shared memory bytes a skinny config needs for a problem (0 for other algorithms).
int64_t SkinnySharedBytes(const TransposeConfig& c, const Problem& p);

// The textbook reference points, always in the family for every element size.
TransposeConfig NaiveConfig();               // "naive"
TransposeConfig TextbookTileConfig();        // "tile32x32.rows8.pad0"
TransposeConfig TextbookPaddedTileConfig();  // "tile32x32.rows8.pad1"

}  // namespace transposed::kernels

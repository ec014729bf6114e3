"""Static check of candidate IR before it ever runs: only allowlisted symbols and state.

Candidate code (an LLM's rewrite, say) is untrusted. A kernel may call a fixed set of LLVM
intrinsics (math, bit, vector, memory and hint ones; NVVM thread-index, barrier, shuffle,
vote, fence, atomic and math ones for CUDA), libm, CUDA's libdevice (``__nv_*``, CUDA only)
and the C memory primitives LLVM itself emits (copies and fills, which keep no state).
Everything else is a violation and the candidate never runs:

* a call to, or any other reference to, an external function outside the allowlist (taking
  ``&system`` and reaching it through ``__builtin_longjmp`` or a stored pointer is as bad
  as calling it), anywhere: instructions, constant expressions, global initializers;
* an intrinsic that is not allowlisted by exact name or a tight family pattern, so new or
  unusual ones (``llvm.eh.sjlj.*``, ``llvm.frameaddress``, ``llvm.experimental.patchpoint``,
  ``llvm.x86.sse.ldmxcsr`` ...) are refused by name;
* inline or module-level assembly, calls through computed addresses, computed gotos, ifuncs;
* writable module-level state (C ``static``/global variables, ``thread_local``, CUDA
  ``__device__`` variables) that the baseline kernel does not itself have: a counter kept
  between calls makes a candidate behave differently on the N-th call;
* functions that keep state between calls (``malloc``/``free``, whose freed chunk comes
  back on the next call; ``__errno_location``) unless the baseline calls them too: only
  stateless functions (libm, ``memcpy``/``memmove``/``memset``) are allowed by themselves;
* external variables (``environ``, ``stdout``), except a GPU kernel's dynamic shared memory;
* explicit sections and static constructors/destructors;
* stack allocations sized by the arguments, or fixed ones over 64 KiB in one function,
  that the baseline does not have (see stack_use: a crash at sizes never verified).

The check is on clang's IR before optimisation; it does not make C memory-safe (an
out-of-bounds write can still corrupt the stack), which the worker process must contain.
Longer than most modules because the allowed intrinsic families are written out, one per
line, for review.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass

from . import stack_use

_LIBM = {
    "sqrt", "cbrt", "hypot", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "pow", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh",
    "asinh", "acosh", "atanh", "erf", "erfc", "tgamma", "lgamma", "fabs", "floor", "ceil",
    "trunc", "round", "lround", "llround", "rint", "lrint", "llrint", "nearbyint", "fmod",
    "remainder", "fmin", "fmax", "fdim", "fma", "copysign", "ldexp", "frexp", "modf",
    "scalbn", "ilogb", "logb", "nextafter", "sincos",
}
ALLOWED_SYMBOLS = frozenset(
    {name + suffix for name in _LIBM for suffix in ("", "f", "l")}
    | {"memcpy", "memmove", "memset", "abs", "labs", "llabs"}
)
# Functions that keep state from one call to the next: a counter fits in a freed heap chunk
# (malloc hands the same chunk back) or in errno's unused bits. A candidate may use one only
# where its baseline does (then, like the baseline's globals, only the dynamic checks guard it).
STATEFUL_SYMBOLS = frozenset(
    {"malloc", "calloc", "realloc", "free", "aligned_alloc", "posix_memalign", "memalign",
     "valloc", "pvalloc", "reallocarray", "__errno_location"}
)

#: Violation kinds, one per class of problem (``Violation.kind``).
KINDS = (
    "forbidden_symbol",     # call to an external function outside the allowlist
    "symbol_reference",     # its address taken (stored, passed, in an initializer)
    "forbidden_intrinsic",  # an LLVM intrinsic outside the allowlist
    "inline_asm",           # inline or module-level assembly
    "indirect_call",        # call through a computed address, computed goto, ifunc
    "mutable_state",        # writable global/static/thread_local the baseline lacks
    "stateful_symbol",      # malloc/free, errno...: state between calls the baseline lacks
    "external_variable",    # reference to a variable defined elsewhere (environ...)
    "section",              # explicit section on a function or variable
    "static_constructor",   # code run at load or unload (constructor/destructor)
    "stack_allocation",     # stack sized by the arguments, or large, where the baseline's is not
)

# -- intrinsics -------------------------------------------------------------------------------
# Overloaded intrinsics carry their types in the name: llvm.fma.v8f32, llvm.memcpy.p0.p0.i64.
_TYPE = (r"(?:p\d+|i\d+|f16|bf16|f32|f64|f80|f128|x86_fp80|ppc_fp128"
         r"|(?:nx)?v\d+(?:p\d+|i\d+|f16|bf16|f32|f64))")
_TYPES = rf"(?:\.{_TYPE})*"


def _family(names: str) -> str:
    return rf"(?:{names}){_TYPES}"


_GENERIC = [
    # floating-point math (what libm calls and __builtin_* math become)
    _family(r"sqrt|powi|sin|cos|tan|asin|acos|atan|atan2|sinh|cosh|tanh|pow|exp|exp2|exp10"
            r"|ldexp|frexp|log|log10|log2|fma|fmuladd|fabs|minnum|maxnum|minimum|maximum"
            r"|minimumnum|maximumnum|copysign|floor|ceil|trunc|rint|nearbyint|round|roundeven"
            r"|lround|llround|lrint|llrint|sincos|sincospi|modf|canonicalize|is\.fpclass"
            r"|arithmetic\.fence|fptosi\.sat|fptoui\.sat|fptrunc\.round|convert\.to\.fp16"
            r"|convert\.from\.fp16|get\.rounding|flt\.rounds"),
    r"experimental\.constrained\.\w+" + _TYPES,  # math under #pragma STDC FENV_ACCESS
    # integer and bit operations
    _family(r"abs|smin|smax|umin|umax|scmp|ucmp|bswap|bitreverse|ctpop|ctlz|cttz|fshl|fshr"
            r"|[su](?:add|sub|mul)\.with\.overflow|[su](?:add|sub|shl)\.sat"
            r"|[su](?:mul|div)\.fix(?:\.sat)?"),
    # vectors (ext_vector_type builtins, __builtin_reduce_*, masked memory)
    r"(?:experimental\.)?vector\.(?:reduce\.\w+|insert|extract|reverse|splice"
    r"|interleave\d|deinterleave\d)" + _TYPES,
    _family(r"masked\.(?:load|store|gather|scatter|expandload|compressstore)"
            r"|(?:experimental\.)?stepvector|vscale"),
    _family(r"matrix\.(?:multiply|transpose|column\.major\.load|column\.major\.store)"),
    # memory: copies, lifetimes and hints about it
    _family(r"memcpy(?:\.inline)?|memmove|memset(?:\.inline)?|lifetime\.(?:start|end)"
            r"|invariant\.(?:start|end)|launder\.invariant\.group|strip\.invariant\.group"
            r"|objectsize|prefetch|ptrmask|threadlocal\.address"),
    # optimisation hints, debug info, annotations, traps
    _family(r"assume|expect|expect\.with\.probability|experimental\.noalias\.scope\.decl"
            r"|dbg\.\w+|annotation|var\.annotation|ptr\.annotation|is\.constant|donothing"
            r"|sideeffect|fake\.use|allow\.runtime\.check|allow\.ubsan\.check|trap|debugtrap"
            r"|ubsantrap|stacksave"),
]
# x86/AArch64 vector math from <immintrin.h>/<arm_neon.h>; the state-changing ones in
# those families (MXCSR, cache flush, monitor/mwait) are refused below.
_CPU_VECTOR = [
    r"x86\.(?:sse\d*|ssse3|sse4[12a]|avx\d*|avx512\w*|avx10\w*|fma4?|xop|f16c|bmi|pclmulqdq"
    r"|aesni)\.[\w.]+",
    r"x86\.vcvtps2ph\.[\w.]+",
    r"aarch64\.neon\.[\w.]+",
]
_CPU_VECTOR_DENIED = re.compile(r"mxcsr|clflush|monitor|mwait")
_NVVM = [
    r"nvvm\.read\.ptx\.sreg\.[\w.]+",
    r"nvvm\.(?:barrier|bar)[\w.]*",
    r"nvvm\.(?:shfl|vote|match|redux|membar|fence|atomic|ldg|ldu|cp\.async|wmma|mma"
    r"|ldmatrix|stmatrix|isspacep|ptr)\.[\w.]+",
    r"nvvm\.(?:activemask|reflect)",
    r"nvvm\.(?:sqrt|rsqrt|rcp|ex2|lg2|sin|cos|div|fma|add|mul|fmin|fmax|fabs|floor|ceil|trunc"
    r"|round|saturate|mul24|umul24|mulhi|umulhi|popc|clz|brev|prmt|abs|min|max|sad|bitcast"
    r"|[fd]2u?i|[fd]2u?ll|u?i2[fd]|u?ll2[fd]|d2f|f2h|h2f|f2bf16|bf2h|ff2bf16x2|ff2f16x2"
    r"|lohi\.i2d|d2i\.lo|d2i\.hi)(?:\.[\w.]+)?",
]
# clocks make a kernel's result depend on time, so it can tell verification from timing
_NVVM_DENIED = re.compile(r"nvvm\.read\.ptx\.sreg\.(?:clock|globaltimer)")
# AMD GPUs (HIP): thread and block ids, the read-only dispatch packet and kernel arguments,
# barriers, cross-lane operations, math, atomics, matrix cores; never the clocks
# (s.memtime, s.memrealtime), the hardware registers (s.getreg) or messages (s.sendmsg)
_AMDGCN = [
    r"amdgcn\.(?:workitem|workgroup)\.id\.[xyz]",
    r"amdgcn\.(?:dispatch|implicitarg|kernarg\.segment|queue)\.ptr|amdgcn\.dispatch\.id",
    r"amdgcn\.(?:s\.barrier|wave\.barrier|s\.waitcnt|sched\.barrier|sched\.group\.barrier"
    r"|iglp\.opt)",
    r"amdgcn\.(?:ds\.bpermute|ds\.permute|ds\.swizzle|mov\.dpp8?|update\.dpp|readfirstlane"
    r"|readlane|writelane|permlane\w*|ballot|icmp|fcmp|mbcnt\.lo|mbcnt\.hi|wave\.reduce\.\w+"
    r"|wwm|strict\.wwm|set\.inactive|live\.mask|ps\.live)(?:\.[\w.]+)?",
    r"amdgcn\.(?:rsq|rcp|sqrt|exp2|log|sin|cos|fract|frexp\.\w+|ldexp|fmed3|fma\.legacy"
    r"|fmul\.legacy|div\.\w+|class|mul\.[ui]24|mulhi\.[ui]24|ubfe|sbfe|lerp|sad\.\w+"
    r"|msad\.\w+|cvt\.[\w.]+|fdot2\w*|[su]dot\d+|mfma\.[\w.]+|smfmac\.[\w.]+"
    r"|atomic\.(?:inc|dec)|global\.atomic\.\w+|flat\.atomic\.\w+|ds\.fadd|ds\.fmin"
    r"|ds\.fmax|is\.shared|is\.private|groupstaticsize)(?:\.[\w.]+)?",
]

_GENERIC_RE = re.compile(r"llvm\.(?:" + "|".join(_GENERIC) + ")")
_CPU_RE = re.compile(r"llvm\.(?:" + "|".join(_CPU_VECTOR) + ")")
_NVVM_RE = re.compile(r"llvm\.(?:" + "|".join(_NVVM) + ")")
_AMDGCN_RE = re.compile(r"llvm\.(?:" + "|".join(_AMDGCN) + ")")

# why some notable intrinsics are refused, for the message
_DENIED_WHY = [
    (r"llvm\.eh\.sjlj\.", "setjmp/longjmp can jump to any address"),
    (r"llvm\.(?:frameaddress|returnaddress|addressofreturnaddress|sponentry)",
     "it exposes return/frame addresses"),
    (r"llvm\.stackrestore", "it sets the stack pointer to a value that is not a saved one"),
    (r"llvm\.experimental\.(?:patchpoint|stackmap|gc\.)", "it calls or patches arbitrary "
     "addresses"),
    (r"llvm\.(?:read|write)_(?:volatile_)?register", "it reads or writes machine registers"),
    (r"llvm\.(?:init|adjust)\.trampoline|llvm\.icall\.|llvm\.local(?:escape|recover)",
     "it builds or reaches code through computed addresses"),
    (r"llvm\.(?:readcyclecounter|readsteadycounter|nvvm\.read\.ptx\.sreg\.(?:clock|global)"
     r"|amdgcn\.s\.mem(?:real)?time)",
     "it reads a clock, so results could depend on timing"),
    (r"llvm\.x86\.|llvm\.aarch64\.", "only vector-math target intrinsics are allowed"),
]


def intrinsic_allowed(name: str, triple: str = "") -> bool:
    """Whether an ``llvm.*`` intrinsic may appear in a candidate for target ``triple``."""
    if _GENERIC_RE.fullmatch(name):
        return True
    if triple.startswith("nvptx"):
        return bool(_NVVM_RE.fullmatch(name)) and not _NVVM_DENIED.search(name)
    if triple.startswith("amdgcn"):
        return bool(_AMDGCN_RE.fullmatch(name))
    return bool(_CPU_RE.fullmatch(name)) and not _CPU_VECTOR_DENIED.search(name)


def _why_denied(name: str) -> str:
    return next((why for pattern, why in _DENIED_WHY if re.match(pattern, name)),
                "it is not on the allowlist")


# -- violations --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Violation:
    symbol: str
    function: str
    reason: str
    kind: str = "forbidden_symbol"

    def describe(self) -> str:
        if self.function == "<module>":
            return self.reason
        return f"{self.reason} in function {self.function!r}"


_ALLOWED_LLVM_GLOBALS = {"llvm.used", "llvm.compiler.used", "llvm.global.annotations"}
_TOKEN = re.compile(r'@"([^"]*)"|@([-\w$.]+)|"[^"]*"|;[^\n]*')
_NAME_EQ = re.compile(r'@(?:"[^"]*"|[-\w$.]+)\s*=\s*')
_GLOBAL_HEAD = re.compile(r"((?:[a-z_]+(?:\([^)]*\))?\s+)*?)(global|constant)\b")
_SECTION = re.compile(r'\bsection\s+"([^"]*)"')
_ALIAS_LINE = re.compile(r'^@(?:"[^"]*"|[-\w$.]+)\s*=\s*(?:[a-z_]+(?:\([^)]*\))?\s+)*?'
                         r'(alias|ifunc)\s.*$', re.MULTILINE)


def _unquote(name: str) -> str:
    return re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), name)


def _symbol_tokens(text: str) -> list[str]:
    """The ``@name`` references in IR text (strings and comments skipped)."""
    names = []
    for match in _TOKEN.finditer(text):
        if match.group(1) is not None:
            names.append(_unquote(match.group(1)))
        elif match.group(2) is not None:
            names.append(match.group(2))
    return names


def _plain(name: str) -> str:
    """The linker name: ``\\01`` asks LLVM not to mangle, the rest is the symbol."""
    return name[1:] if name.startswith("\x01") else name


def _address(value) -> int:
    return ctypes.cast(value._ptr, ctypes.c_void_p).value or 0


def _global_facts(variable) -> tuple[str, bool, bool, int]:
    """(head text, is ``constant``, is thread-local, address space) of a defined global."""
    head = str(variable).split("\n", 1)[0]
    name = _NAME_EQ.match(head)  # the name may be quoted and contain anything
    match = _GLOBAL_HEAD.match(head, name.end() if name else 0)
    prefix = match.group(1) if match else head
    space = re.search(r"addrspace\((\d+)\)", prefix)
    return (head, bool(match and match.group(2) == "constant"), "thread_local" in prefix,
            int(space.group(1)) if space else 0)


def _is_writable(variable, triple: str) -> bool:
    _, constant, thread_local, space = _global_facts(variable)
    if thread_local:
        return True
    if constant:
        return False
    # __shared__ (3) lives per block and __constant__ (4) is read-only on the device, on
    # NVIDIA's GPUs (CUDA) and AMD's (HIP: LDS and constant memory) alike
    return not (triple.startswith(("nvptx", "amdgcn")) and space in (3, 4))


def writable_globals(module) -> frozenset[tuple[str, str]]:
    """(name, value type) of every writable module-level variable a module defines: the
    summary of a baseline that :func:`check_module` compares candidates against."""
    triple = module.triple or ""
    return frozenset(
        (v.name, str(v.global_value_type)) for v in module.global_variables
        if not v.is_declaration and not v.name.startswith("llvm.") and _is_writable(v, triple))


def stateful_symbols(module) -> frozenset[str]:
    """The functions of :data:`STATEFUL_SYMBOLS` a module refers to."""
    return frozenset(_plain(f.name) for f in module.functions
                     if f.is_declaration) & STATEFUL_SYMBOLS


@dataclass(frozen=True)
class BaselineState:
    """What state a baseline keeps between calls, which its candidates may keep too: its
    writable globals (name, value type) and the stateful functions it calls."""

    globals: frozenset[tuple[str, str]] = frozenset()
    symbols: frozenset[str] = frozenset()
    stack: stack_use.StackUse = stack_use.StackUse()

    @classmethod
    def of(cls, module) -> BaselineState:
        return cls(writable_globals(module), stateful_symbols(module), stack_use.of(module))


def _baseline_summary(baseline) -> BaselineState:
    if baseline is None:
        return BaselineState()
    if isinstance(baseline, BaselineState):
        return baseline
    if hasattr(baseline, "global_variables"):
        return BaselineState.of(baseline)
    return BaselineState(frozenset((str(n), str(t)) for n, t in baseline))


def check_module(module, baseline=None, runtime_functions=frozenset(),
                 memory_sections=frozenset()) -> list[Violation]:
    """Every use of something outside the allowlist in an llvmlite module.

    ``baseline`` (the original kernel's llvmlite module, its :class:`BaselineState`, or
    :func:`writable_globals` of it) lets a candidate keep the writable globals the baseline
    already has, same name and type, and call the stateful functions it calls.
    ``runtime_functions`` and ``memory_sections`` come from the backend (its
    ``sandbox_functions`` and ``sandbox_sections``): the services of a runtime it links in
    itself, and sections of per-block memory it resets before every launch (CUDA
    emulation's barriers and shuffles, and its ``__shared__`` arrays).
    """
    triple = module.triple or ""
    text = str(module)
    summary = _baseline_summary(baseline)
    allowed_state = summary.globals
    runtime_functions = frozenset(runtime_functions) | summary.symbols
    functions = list(module.functions)
    variables = list(module.global_variables)
    defined = {f.name for f in functions if not f.is_declaration}
    defined |= {v.name for v in variables if not v.is_declaration}
    declared_functions = {f.name for f in functions if f.is_declaration}
    declared_variables = {v.name for v in variables if v.is_declaration}
    violations: list[Violation] = []

    def add(violation: Violation) -> None:
        if violation not in violations:
            violations.append(violation)

    # file-scope asm can define any symbol (even an allowlisted name such as fmaf)
    if re.search(r"^module asm ", text, re.MULTILINE):
        add(Violation("asm", "<module>", "module-level inline assembly", "inline_asm"))
    for variable in variables:
        name = variable.name
        if variable.is_declaration:
            # a GPU kernel's dynamic shared memory is an external array in address space 3
            if "addrspace(3)" not in str(variable.type) and \
                    "addrspace(3)" not in str(variable).split("\n", 1)[0]:
                add(Violation(name, "<module>", f"reference to external variable '{name}'",
                              "external_variable"))
            continue
        if name.startswith("llvm."):
            if name in ("llvm.global_ctors", "llvm.global_dtors"):
                add(Violation(name, "<module>", "constructor or destructor function "
                              f"('{name}': code run when the kernel is loaded or unloaded)",
                              "static_constructor"))
            elif name not in _ALLOWED_LLVM_GLOBALS:
                add(Violation(name, "<module>", f"special LLVM variable '{name}'"))
            continue
        head, _, thread_local, _ = _global_facts(variable)
        section = _SECTION.search(re.sub(r'c"[^"]*"', "", head))
        if section and section.group(1) in memory_sections and not thread_local:
            continue
        if section:
            add(Violation(name, "<module>", f"variable '{name}' placed in section "
                          f"'{section.group(1)}'", "section"))
        if _is_writable(variable, triple) and \
                (name, str(variable.global_value_type)) not in allowed_state:
            what = "thread-local variable" if thread_local else \
                "writable global or static variable"
            add(Violation(name, "<module>", f"{what} '{name}' (state kept between calls)",
                          "mutable_state"))
    for symbol, reason in stack_use.violations(stack_use.of(module), summary.stack):
        add(Violation(symbol, "<module>", reason, "stack_allocation"))
    for line in _ALIAS_LINE.finditer(text):
        if line.group(1) == "ifunc":
            symbol = _symbol_tokens(line.group(0))[0]
            add(Violation(symbol, "<module>", f"ifunc '{symbol}' (resolved through a "
                          "computed address at load time)", "indirect_call"))

    def check_references(owner: str, where: str, body: str, called: set[str]) -> None:
        for name in dict.fromkeys(_symbol_tokens(body)):
            if name in defined or name in declared_variables or name in called:
                continue
            if name not in declared_functions:
                continue  # unnamed values and the like: defined in this module
            if name.startswith("llvm."):
                if not intrinsic_allowed(name, triple):
                    add(Violation(name, owner, f"LLVM intrinsic '{name}' ({_why_denied(name)})"
                                  + where, "forbidden_intrinsic"))
            elif _plain(name) in STATEFUL_SYMBOLS and _plain(name) not in runtime_functions:
                add(_stateful(_plain(name), owner, "reference to", where))
            elif not _allowed_function(_plain(name), triple, runtime_functions):
                add(Violation(_plain(name), owner, f"reference to external function "
                              f"'{_plain(name)}' (its address is taken)" + where,
                              "symbol_reference"))

    for variable in variables:  # llvm.used and the like included
        if not variable.is_declaration:
            check_references("<module>", f" in the initializer of '{variable.name}'",
                             str(variable), set())
    for line in _ALIAS_LINE.finditer(text):
        check_references("<module>", " in an alias", line.group(0), set())
    for function in functions:
        if not function.is_declaration:
            called = _check_body(function, triple, defined, add, runtime_functions)
            head = str(function).split("{", 1)[0]
            section = _SECTION.search(head)
            if section:
                add(Violation(function.name, function.name, f"function placed in section "
                              f"'{section.group(1)}'", "section"))
            check_references(function.name, "", str(function), called)
    return violations


# device printf and a failed assert: system calls the CUDA driver provides to every kernel
_NVPTX_SYSTEM_CALLS = frozenset({"vprintf", "__assertfail"})


def _allowed_function(name: str, triple: str, runtime_functions=frozenset()) -> bool:
    # __nv_* is CUDA's libdevice math, linked in for NVPTX only
    if name in ALLOWED_SYMBOLS or name in runtime_functions:
        return True
    return triple.startswith("nvptx") and (name.startswith("__nv_")
                                           or name in _NVPTX_SYSTEM_CALLS)


def _check_body(function, triple: str, defined: set[str], add,
                runtime_functions=frozenset()) -> set[str]:
    """Calls, asm and computed jumps in one function; returns the names it calls directly."""
    from llvmlite.binding import ValueKind

    called: set[str] = set()
    instructions = [i for block in function.blocks for i in block.instructions]
    for instruction in instructions:
        opcode = instruction.opcode
        if opcode == "indirectbr":
            add(Violation("<indirect>", function.name, "computed goto (jump through a "
                          "computed address)", "indirect_call"))
            continue
        if opcode not in ("call", "invoke", "callbr"):
            continue
        callee = list(instruction.operands)[-1]
        name = callee.name
        if callee.value_kind == ValueKind.inline_asm:
            add(Violation("asm", function.name, "inline assembly", "inline_asm"))
            continue
        if callee.value_kind != ValueKind.function or not name:
            add(Violation("<indirect>", function.name,
                          "call through a computed address (function pointer)",
                          "indirect_call"))
            continue
        called.add(name)
        if name in defined:
            continue
        if name.startswith("llvm."):
            if name.startswith("llvm.stackrestore") and \
                    _restores_saved_stack(instruction, instructions):
                continue
            if not intrinsic_allowed(name, triple):
                add(Violation(name, function.name,
                              f"call to LLVM intrinsic '{name}' ({_why_denied(name)})",
                              "forbidden_intrinsic"))
        elif _plain(name) in STATEFUL_SYMBOLS and _plain(name) not in runtime_functions:
            add(_stateful(_plain(name), function.name, "call to"))
        elif not _allowed_function(_plain(name), triple, runtime_functions):
            add(Violation(_plain(name), function.name,
                          f"call to external function '{_plain(name)}'", "forbidden_symbol"))
    return called


def _stateful(name: str, owner: str, what: str, where: str = "") -> Violation:
    why = ("errno outlives the call, so its bits can carry a count from one call to the next"
           if name == "__errno_location" else
           "heap memory outlives the call: a freed chunk comes back on the next call with "
           "what was left in it")
    return Violation(name, owner, f"{what} stateful function '{name}' ({why}; the baseline "
                     "does not use it)" + where, "stateful_symbol")


def _is_stacksave(instruction) -> bool:
    return instruction is not None and instruction.opcode == "call" and \
        list(instruction.operands)[-1].name.startswith("llvm.stacksave")


def _restores_saved_stack(restore, instructions) -> bool:
    """clang frees a VLA with ``stackrestore`` of what ``stacksave`` returned, kept in a
    private stack slot; any other operand could point the stack anywhere."""
    # operands come back from llvmlite as plain values: find them among the instructions
    by_address = {_address(i): i for i in instructions}
    value = by_address.get(_address(list(restore.operands)[0]))
    if value is None:
        return False
    if _is_stacksave(value):
        return True
    if value.opcode != "load":
        return False
    slot = by_address.get(_address(list(value.operands)[0]))
    if slot is None or slot.opcode != "alloca":
        return False
    key = _address(slot)
    for instruction in instructions:
        operands = list(instruction.operands)
        uses = [i for i, op in enumerate(operands) if _address(op) == key]
        if not uses:
            continue
        if instruction.opcode == "load" and uses == [0]:
            continue
        if instruction.opcode == "store" and uses == [1] and \
                _is_stacksave(by_address.get(_address(operands[0]))):
            continue
        if instruction.opcode == "call" and operands[-1].name.startswith("llvm.lifetime"):
            continue
        return False  # the slot escapes or holds something else
    return True


_ADVICE = {
    "forbidden_intrinsic": (
        "Allowed LLVM intrinsics are the math, bit, vector, memory and hint ones clang emits "
        "for ordinary kernel code (and, for CUDA, the NVVM thread-index, barrier, shuffle, "
        "vote, fence, atomic and math ones); setjmp/longjmp, frame or return addresses, "
        "stack pointer changes, register access and clocks are not."),
    "inline_asm": "Write the kernel in C/CUDA without inline or file-scope assembly.",
    "indirect_call": ("Call functions directly by name: function pointers, computed gotos "
                      "and ifuncs are not allowed."),
    "mutable_state": ("Keep state in the arguments; static or global variables that change "
                      "between calls are not allowed (make read-only tables `const`)."),
    "stateful_symbol": ("Kernels keep no state between calls: use a local array (on the "
                        "stack) for scratch space instead of malloc/free, and do not touch "
                        "errno."),
    "external_variable": ("Use only the kernel's arguments: external variables such as "
                          "environ or stdout are not allowed."),
    "section": "Remove __attribute__((section(...))).",
    "stack_allocation": ("Use fixed-size local arrays of at most 64 KiB per function for "
                         "scratch space (a tile, processed block by block), not arrays or "
                         "alloca sized by the arguments."),
    "static_constructor": "Remove __attribute__((constructor)) and ((destructor)).",
}


def advice(violations: list[Violation]) -> str:
    """What to tell whoever wrote the candidate (an LLM, via feedback): what is wrong,
    what is allowed, how to fix it."""
    described = list(dict.fromkeys(v.describe() for v in violations))
    kinds = list(dict.fromkeys(v.kind for v in violations))
    names = sorted({v.symbol for v in violations
                    if v.kind in ("forbidden_symbol", "symbol_reference", "stateful_symbol")})
    remove = f"; remove {', '.join(names)} and compute the result in the kernel itself" \
        if names else ""
    parts = [f"forbidden: {'; '.join(described)}.",
             "Kernels may only call LLVM intrinsics, libm math functions (sqrtf, expf, fmaf, "
             f"...) and memcpy/memmove/memset{remove}."]
    if "symbol_reference" in kinds:
        parts.append("Do not take the address of library functions.")
    parts += [_ADVICE[kind] for kind in kinds if kind in _ADVICE]
    return " ".join(parts)

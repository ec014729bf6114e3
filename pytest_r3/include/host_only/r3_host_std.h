/* pytest-r3: the C++ standard library's host-side headers (<iostream>, <vector>, <string>,
 * <chrono>, <algorithm>, <fstream>...) for the code beside kernels.
 *
 * pytest-r3 builds one kernel of a .cu file and sets aside the host functions it does not
 * reach before the build; what host code leaves behind at file scope (`using namespace std;`,
 * `using std::vector;`, a prototype naming std::string) only needs the names declared. Each
 * of those headers includes this one: declarations of the common names, no code. Device
 * code that uses one of them gets clang's error, and pytest-r3 says it is not supported.
 */
#ifndef R3_HOST_STD_H
#define R3_HOST_STD_H
#include <stddef.h>
namespace std {
using ::size_t;
using ::ptrdiff_t;
template <class T> class allocator;
template <class C> struct char_traits;
template <class T> struct less;
template <class T> struct greater;
template <class T> struct plus;
template <class T> struct multiplies;
template <class T> struct hash;
template <class T> struct equal_to;
template <class T> struct default_delete;
template <class T1, class T2> struct pair;
template <class C, class Traits = char_traits<C>, class Allocator = allocator<C>>
class basic_string;
typedef basic_string<char, char_traits<char>, allocator<char>> string;
template <class C, class Traits> class basic_ostream;
template <class C, class Traits> class basic_istream;
template <class C, class Traits> class basic_ifstream;
template <class C, class Traits> class basic_ofstream;
template <class C, class Traits> class basic_fstream;
template <class C, class Traits, class Allocator> class basic_stringstream;
template <class C, class Traits, class Allocator> class basic_ostringstream;
typedef basic_ostream<char, char_traits<char>> ostream;
typedef basic_istream<char, char_traits<char>> istream;
typedef basic_ifstream<char, char_traits<char>> ifstream;
typedef basic_ofstream<char, char_traits<char>> ofstream;
typedef basic_fstream<char, char_traits<char>> fstream;
typedef basic_stringstream<char, char_traits<char>, allocator<char>> stringstream;
typedef basic_ostringstream<char, char_traits<char>, allocator<char>> ostringstream;
extern ostream cout, cerr, clog;
extern istream cin;
template <class C, class Traits> basic_ostream<C, Traits> &endl(basic_ostream<C, Traits> &);
template <class T, class Allocator = allocator<T>> class vector;
template <class T, class Allocator = allocator<T>> class list;
template <class T, class Allocator = allocator<T>> class deque;
template <class K, class V, class Compare = less<K>, class Allocator = allocator<pair<const K, V>>>
class map;
template <class K, class Compare = less<K>, class Allocator = allocator<K>> class set;
template <class K, class V, class Hash = hash<K>, class Equal = equal_to<K>,
          class Allocator = allocator<pair<const K, V>>>
class unordered_map;
template <class K, class Hash = hash<K>, class Equal = equal_to<K>,
          class Allocator = allocator<K>>
class unordered_set;
template <class... T> class tuple;
template <class T, size_t N> struct array;
template <class T> class function;
template <class T, class Deleter = default_delete<T>> class unique_ptr;
template <class T> class shared_ptr;
class exception;
class runtime_error;
class invalid_argument;
class out_of_range;
class thread;
class mutex;
class random_device;
template <class T> class uniform_int_distribution;
template <class T> class uniform_real_distribution;
template <class T> class normal_distribution;
template <class U, U A, U C, U M> class linear_congruential_engine;
template <class U, size_t W, size_t N, size_t M, size_t R, U A, size_t US, U D, size_t S, U B,
          size_t T, U C, size_t L, U F>
class mersenne_twister_engine;
namespace chrono {
template <class Rep, class Period> class duration;
template <class Clock, class Duration> class time_point;
class system_clock;
class steady_clock;
typedef steady_clock high_resolution_clock;
}
template <class InputIt, class T> T accumulate(InputIt first, InputIt last, T init);
template <class RandomIt> void sort(RandomIt first, RandomIt last);
template <class ForwardIt> ForwardIt max_element(ForwardIt first, ForwardIt last);
template <class ForwardIt> ForwardIt min_element(ForwardIt first, ForwardIt last);
template <class InputIt, class OutputIt> OutputIt copy(InputIt first, InputIt last,
                                                       OutputIt out);
template <class ForwardIt, class T> void fill(ForwardIt first, ForwardIt last, const T &value);
}
#endif

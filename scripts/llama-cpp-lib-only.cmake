# Included by CMake right after llama.cpp's own project() call (scripts/setup passes it as
# CMAKE_PROJECT_llama.cpp_INCLUDE when it builds llama-cpp-python). The Python binding loads
# only libllama and ggml; llama-cpp-python forces llama.cpp's "common" library on (argument
# parsing, chat templates, an HTTP client for downloads: about half of the compile), which
# nothing here loads. Turning it off here, after that FORCE and before llama.cpp reads the
# option, builds the same libllama in about half the time.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)

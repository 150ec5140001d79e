package dev.wiggle;

import java.nio.file.Files;
import java.nio.file.Path;

/** Where the repository's spec/ lives, for tests that read its vectors. */
public final class Repo {
  private Repo() {}

  public static Path root() {
    String prop = System.getProperty("wiggle.repo");
    Path p = prop != null ? Path.of(prop) : Path.of("../..");
    if (!Files.isDirectory(p.resolve("spec/conformance"))) {
      throw new IllegalStateException("cannot find spec/conformance under " + p.toAbsolutePath()
          + "; run the tests from sdk/java or set -Dwiggle.repo");
    }
    return p.normalize();
  }
}

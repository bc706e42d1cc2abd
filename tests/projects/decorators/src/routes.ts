// A router in the style of decorator-based frameworks (experimentalDecorators)
const ROUTES: { method: string; path: string; handler: string }[] = [];

function Route(method: string, path: string) {
  return (target: object, key: string, descriptor: PropertyDescriptor) => {
    ROUTES.push({ method, path, handler: key });
    return descriptor;
  };
}

function Controller(prefix: string) {
  return <T extends new (...args: any[]) => object>(constructor: T) =>
    class extends constructor {
      prefix = prefix;
    };
}

function Param(name: string) {
  return (target: object, key: string, index: number) => {
    ROUTES.push({ method: "PARAM", path: `${key}#${index}`, handler: name });
  };
}

@Controller("/api")
export class Api {
  @Route("GET", "/hello")
  hello(@Param("who") who: string) {
    return { hello: who };
  }

  @Route(
    "POST",
    "/echo",
  )
  echo(body: unknown) {
    return { echo: body };
  }
}

export const routes = ROUTES;
